"""Command templates: static shell text with {name} fields filled by shell-quoted values.

The static text is the user's own shell (pipes, redirections are theirs to write); every value
put into a field is passed through ``shlex.quote``, so whatever it holds (``$(...)``,
backticks, quotes, newlines, ``;``) reaches the program as one literal argument. Environment
variables are never put into shell text at all: they travel as ``NAME=value`` argv items,
exported as they are by the starting shell (jobs.remote.SPAWN).
"""

import math
import random
import re
import shlex
import string

from django.conf import settings
from django.core.exceptions import ValidationError

# \Z, not $: "$" also matches before a final newline, so "lr\n" would pass as a name.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_formatter = string.Formatter()


def fields_of(template: str) -> list[str]:
    """The field names of a template, in order of first appearance; bad syntax is refused."""
    names = []
    try:
        parsed = list(_formatter.parse(template))
    except ValueError as exc:
        raise ValidationError(
            f"The template is not valid: {exc} (write {{{{ for a literal {{)."
        ) from None
    shell = _ShellText()
    for literal, name, spec, conversion in parsed:
        shell.read(literal)
        if name is None:
            continue
        if not NAME.match(name) or spec or conversion:
            raise ValidationError(
                f"{{{name}}} is not a field: fields are plain names like {{lr}} "
                "(write {{ and }} for literal braces)."
            )
        shell.check_field(name)
        if name not in names:
            names.append(name)
    return names


class _ShellText:
    """Where the shell is in the template's static text, so each field can be checked to be
    in a place where a quoted value stays one argument.

    Inside quotes the value's own quotes would close the template's (``'print("{x}")'``
    given ``$(id)`` runs it), after a backslash its first quote would be escaped, after a
    bare ``$`` its quotes would become ``$'...'`` (which reads escapes), and in a
    here-document quotes mean nothing; such templates are refused rather than filled.
    """

    def __init__(self):
        self.quote = ""  # "'", '"' or "$'" while inside that kind of quotes
        self.escaped = False
        self.angles = 0  # unquoted "<" in a row: two make a here-document, three do not
        self.here_document = False
        self.dollar = False  # the text so far ends in an unquoted, unescaped "$"

    def read(self, text: str) -> None:
        previous = ""
        for char in text:
            self._count_angles(char)
            self._step(char, previous)
            previous = char

    def _count_angles(self, char: str) -> None:
        if char == "<" and not self.quote and not self.escaped:
            self.angles += 1
            return
        if self.angles == 2:
            self.here_document = True
        self.angles = 0

    def _step(self, char: str, previous: str) -> None:
        # A bare "$" before a field would make the value's quotes $'...' (escapes read).
        self.dollar = char == "$" and not self.escaped and not self.quote
        if self.escaped:
            self.escaped = False
        elif char == "\\" and self.quote != "'":
            self.escaped = True
        elif self.quote:
            if char == self.quote[-1]:
                self.quote = ""
        elif char == "'":
            self.quote = "$'" if previous == "$" else "'"
        elif char == '"':
            self.quote = '"'

    def check_field(self, name: str) -> None:
        where = None
        if self.quote:
            where = "inside quotes"
        elif self.escaped:
            where = "right after a backslash"
        elif self.dollar:
            where = "right after a $"
        elif self.here_document or self.angles == 2:
            where = "after a here-document (<<)"
        if where:
            raise ValidationError(
                f"{{{name}}} is {where}: the service quotes each value itself, so a field "
                f"must stand where a shell argument can (write --name {{{name}}}, not "
                f'--name "{{{name}}}"). To use a value inside a quoted script, pass it as an '
                "environment variable instead."
            )


def render(template: str, values: dict) -> str:
    """The template with each field replaced by its value, shell-quoted."""
    for name in values:
        if not NAME.match(str(name)):
            raise ValidationError(f"{name!r} is not a valid parameter name.")
    missing = [n for n in fields_of(template) if n not in values]
    if missing:
        raise ValidationError(f"No value for {', '.join('{' + n + '}' for n in missing)}.")
    out = []
    for literal, name, _, _ in _formatter.parse(template):
        out.append(literal)
        if name is not None:
            out.append(shlex.quote(str(values[name])))
    return "".join(out)


def check_env(env: dict) -> dict[str, str]:
    """Environment variables as str -> str, with valid names."""
    if not isinstance(env, dict):
        raise ValidationError("Environment variables must be an object of NAME: value.")
    for name in env:
        if not NAME.match(str(name)):
            raise ValidationError(f"{name!r} is not a valid environment variable name.")
    return {str(k): str(v) for k, v in env.items()}


def command_line(env: dict, command: str) -> str:
    """How a task's command reads with its environment: what the pages show."""
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f"{assignments} {command}".strip()


# --- grids ---------------------------------------------------------------------------------


def grid(values: dict[str, list], samples: int | None = None, seed: int | None = None):
    """One dict per combination of the value lists: all of them, or ``samples`` at random.

    Random samples are drawn without repetition with ``random.Random(seed)``, so the same
    seed gives the same tasks. The combinations are counted, never built: a sample is drawn
    from their numbers (a 10^8-combination grid costs no more than a small one), and a
    grid with more tasks than ``JOBS_MAX_TASKS`` is refused before anything is made.
    """
    check_grid(values)
    names = list(values)
    total = math.prod(len(options) for options in values.values())
    if samples is not None and samples < 1:
        raise ValidationError("The number of samples must be at least 1.")
    wanted = total if samples is None else min(samples, total)
    limit = settings.JOBS_MAX_TASKS
    if wanted > limit:
        raise ValidationError(
            f"The grid makes {wanted} tasks; at most {limit} are allowed in one job "
            "(ask for fewer with samples)."
        )
    if samples is None:
        numbers = range(total)
    else:
        # sample() picks by position alone, so this draws what sampling the list of all
        # combinations with the same seed drew.
        numbers = random.Random(seed).sample(range(total), wanted)  # noqa: S311
    return [dict(zip(names, _combination(values, n), strict=True)) for n in numbers]


def check_grid(values: dict[str, list]) -> None:
    if not values:
        raise ValidationError("A grid needs at least one parameter with values.")
    for name, options in values.items():
        if not NAME.match(str(name)):
            raise ValidationError(f"{name!r} is not a valid parameter name.")
        if not isinstance(options, list) or not options:
            raise ValidationError(f"Parameter {name!r} needs a non-empty list of values.")


def _combination(values: dict[str, list], number: int) -> list:
    """The combination at position ``number`` of itertools.product(*values.values())."""
    picked = []
    for options in reversed(list(values.values())):
        number, index = divmod(number, len(options))
        picked.append(options[index])
    return picked[::-1]


def parse_value_lists(text: str) -> dict[str, list[str]]:
    """Lines ``name: v1, v2, v3`` (or ``name = ...``) into value lists, for the grid form."""
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = re.match(r"\s*([^:=]+?)\s*[:=](.*)", line)
        if not match:
            raise ValidationError(f"Line {number}: write 'name: value1, value2'.")
        values[match[1]] = [v.strip() for v in match[2].split(",") if v.strip()]
    return values
