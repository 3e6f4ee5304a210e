"""The environment variables the service reads: each declared once, typed, and checked.

hiveproject/settings.py declares every variable where it uses it, with its kind, default and
a one-line help::

    env.integer("Q_WORKERS", 3, "worker processes per machine", min=1)

A value is taken from the process environment, else from ``HIVE_DATA_DIR/hive.env``, else
the default; a secret (``env.secret``) may instead be in the file ``NAME_FILE`` names. A
value that does not parse as its kind (``DEBUG=ture``, ``Q_WORKERS=-3``,
``PROTECTION_LEVEL=strikt``), or settings that do not go together (``env.error``), are noted,
and ``env.check()`` at the end of the settings stops the start with one error naming every
bad variable, its value, where it came from and what is accepted. ``manage.py`` prints that
error alone, without a traceback.

``python -m hiveproject.settings_reference`` writes the settings reference (docs/settings.md)
from the same declarations; tests/test_settings_env.py fails while the committed one is
stale. Run it through ``bin/settings-reference``, which gives it a clean environment.

Why our own module: django-environ reads ``DEBUG=ture`` as False without a word; environs
(marshmallow) and pydantic-settings are strict, but neither names the value nor writes a
reference, and they add 9 and 26 MiB to every process of a service that counts its MiB
(tests/test_process_memory.py).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
WHOLE_NUMBER = re.compile(r"[+-]?\d+")
SHOWN_VALUE_CHARS = 80


class BadEnvironment(ImproperlyConfigured):
    """One or more environment variables have values the service cannot use."""


@dataclass(frozen=True)
class Variable:
    """One declared environment variable, as the reference lists it."""

    name: str
    section: str
    accepts: str
    default: str
    help: str


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines, as ``manage.py init`` writes hive.env; blank lines and ``#``
    comments are skipped."""
    values = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                values[key.strip()] = value.strip()
    return values


def in_words(value: Any) -> str:
    """A default as the reference writes it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ",".join(map(str, value)) if value else "(none)"
    if value == "":
        return "(empty)"
    return str(value)


class Env:
    """Declares, reads and checks the service's environment variables.

    Every reader takes the variable's name, its default (returned as given when the
    variable is unset) and a one-line help; ``shown`` replaces the default in the reference
    where the default is computed from other settings. An empty value means the default,
    except for text and lists, where it is the empty text or list.
    """

    def __init__(self, environ: Mapping[str, str]):
        self._environ = environ
        self._file: dict[str, str] = {}
        self._file_name = ""
        self._section = ""
        self.variables: dict[str, Variable] = {}
        self.errors: list[str] = []

    # --- Declaring ----------------------------------------------------------------------

    def load_file(self, path: Path) -> None:
        """Values from ``path`` (hive.env) for what the environment does not set."""
        self._file, self._file_name = read_env_file(path), str(path)

    def section(self, title: str) -> None:
        """The variables declared from here on are listed under ``title``."""
        self._section = title

    def given(self, name: str) -> bool:
        """Whether ``name`` has a non-empty value in the environment or the file."""
        return bool(self._raw(name)[0].strip())

    def text(
        self,
        name: str,
        default: str,
        help: str,
        *,
        shown: str | None = None,
        pattern: str | None = None,
        accepts: str = "text",
    ) -> str:
        """Any text, or text matching ``pattern`` (described by ``accepts``)."""
        raw = self._declare(name, accepts, default, shown, help)
        if raw is None:
            return default
        if pattern and not re.fullmatch(pattern, raw.strip()):
            return self._bad(name, raw, accepts, default)
        return raw.strip() if pattern else raw

    def boolean(self, name: str, default: bool, help: str, *, shown: str | None = None) -> bool:
        accepts = ", ".join(f"{yes}/{no}" for yes, no in zip(TRUE, FALSE, strict=True))
        raw = self._declare(name, accepts, default, shown, help, empty_is_default=True)
        if raw is None:
            return default
        value = raw.strip().lower()
        if value in TRUE + FALSE:
            return value in TRUE
        return self._bad(name, raw, accepts, default)

    def integer(
        self,
        name: str,
        default: int,
        help: str,
        *,
        min: int | None = 0,
        max: int | None = None,
        shown: str | None = None,
    ) -> int:
        """A whole number within [min, max] (by default: not negative)."""
        accepts = "a whole number" + _bounds(min, max)
        raw = self._declare(name, accepts, default, shown, help, empty_is_default=True)
        if raw is None:
            return default
        if not WHOLE_NUMBER.fullmatch(raw.strip()):
            return self._bad(name, raw, accepts, default)
        value = int(raw)
        if (min is not None and value < min) or (max is not None and value > max):
            return self._bad(name, raw, accepts, default)
        return value

    def number(
        self,
        name: str,
        default: float,
        help: str,
        *,
        positive: bool = False,
        max: float | None = None,
        shown: str | None = None,
    ) -> float:
        """A finite decimal number, not negative (``positive``: above 0), at most ``max``."""
        accepts = "a number" + _bounds(0, max, positive)
        raw = self._declare(name, accepts, default, shown, help, empty_is_default=True)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            return self._bad(name, raw, accepts, default)
        low_ok = value > 0 if positive else value >= 0
        if not math.isfinite(value) or not low_ok or (max is not None and value > max):
            return self._bad(name, raw, accepts, default)
        return value

    def choice(
        self,
        name: str,
        default: str,
        help: str,
        choices: tuple[str, ...],
        *,
        shown: str | None = None,
    ) -> str:
        """One of ``choices``, in any case; the choice is returned as declared."""
        accepts = "one of " + ", ".join(f"`{c}`" for c in choices)
        shown = f"`{default}`" if shown is None else shown
        raw = self._declare(name, accepts, default, shown, help, empty_is_default=True)
        if raw is None:
            return default
        by_key = {c.lower(): c for c in choices}
        if raw.strip().lower() in by_key:
            return by_key[raw.strip().lower()]
        return self._bad(name, raw, accepts, default)

    def url(
        self,
        name: str,
        default: str,
        help: str,
        schemes: tuple[str, ...],
        *,
        host: bool = False,
        shown: str | None = None,
    ) -> str:
        """A URL with one of ``schemes``; with ``host``, one that names a host."""
        accepts = ("a URL with a host: " if host else "a URL: ") + ", ".join(
            f"`{s}://…`" for s in schemes
        )
        raw = self._declare(name, accepts, default, shown, help, empty_is_default=True)
        if raw is None:
            return default
        value = raw.strip()
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
        except ValueError:
            return self._bad(name, _without_password(value), accepts, default)
        if parts.scheme not in schemes or not (
            parts.hostname if host else parts.netloc or parts.path
        ):
            return self._bad(name, _without_password(value), accepts, default)
        return value

    def path(self, name: str, default: Path, help: str, *, shown: str | None = None) -> Path:
        raw = self._declare(name, "a path", default, shown, help, empty_is_default=True)
        return default if raw is None else Path(raw.strip())

    def timezone(self, name: str, default: str, help: str) -> str:
        accepts = "a time zone name, e.g. `Europe/Warsaw`"
        raw = self._declare(name, accepts, default, None, help, empty_is_default=True)
        if raw is None:
            return default
        try:
            ZoneInfo(raw.strip())
        except (ZoneInfoNotFoundError, ValueError):
            return self._bad(name, raw, accepts, default)
        return raw.strip()

    def csv(self, name: str, default: str, help: str, *, shown: str | None = None) -> list[str]:
        """Comma-separated items, blanks around them dropped."""
        raw = self._declare(name, "a comma-separated list", _items(default), shown, help)
        return _items(default if raw is None else raw)

    def json_or_csv(self, name: str, default: list, help: str, *, shown: str | None = None) -> list:
        """A JSON list, or comma-separated items; empty: the default."""
        accepts = "a JSON list, or a comma-separated list"
        raw = self._declare(name, accepts, default, shown, help, empty_is_default=True)
        if raw is None:
            return default
        if raw.strip().startswith(("[", "{")):  # JSON, which must be a list
            try:
                value = json.loads(raw)
            except ValueError:
                value = None
            return value if isinstance(value, list) else self._bad(name, raw, accepts, default)
        return _items(raw) or default

    def secret(self, name: str, help: str) -> str:
        """A secret given as ``NAME``, or in the file ``NAME_FILE`` names (its trailing
        newlines dropped), so that it can stay out of hive.env and the process's environment.
        Both set is an error (which one was meant?); so is a file the service cannot read.
        The secret itself is never shown."""
        value = self.text(name, "", help, shown="(none)", accepts=f"text; or `{name}_FILE`")
        file_name = f"{name}_FILE"
        accepts = "a file the service can read"
        path = self._declare(
            file_name, accepts, "", "(none)", f"a file holding `{name}`", empty_is_default=True
        )
        if path is None:
            return value
        if value:
            self.error(f"{name} and {file_name} are both set: set one of them")
            return value
        try:
            return Path(path.strip()).read_text().rstrip("\n")
        except OSError as exc:
            return self._bad(file_name, path, f"{accepts} ({exc.strerror})", "")

    # --- Checking -------------------------------------------------------------------------

    def error(self, message: str) -> None:
        """A combination of values the service cannot use, each variable good alone (a
        feature turned on without what it needs): stops the start with the bad values."""
        self.errors.append(f"  {message}")

    def check(self) -> None:
        """Stop here, naming every bad value, if any variable had one."""
        if self.errors:
            raise BadEnvironment(
                "The service cannot start: these settings have values it cannot use "
                "(docs/settings.md lists every setting).\n" + "\n".join(self.errors)
            )

    # --- Inside ---------------------------------------------------------------------------

    def _raw(self, name: str) -> tuple[str, str]:
        """The value and where it came from; ("", "") when unset."""
        if name in self._environ:
            return self._environ[name], "the environment"
        if name in self._file:
            return self._file[name], self._file_name
        return "", ""

    def _declare(
        self,
        name: str,
        accepts: str,
        default: Any,
        shown_as: str | None,
        help: str,
        empty_is_default: bool = False,
    ) -> str | None:
        """Record the declaration; the raw value, or None where the default applies."""
        if name in self.variables:
            raise ValueError(f"{name} is declared twice in the settings")
        self.variables[name] = Variable(
            name, self._section, accepts, in_words(default) if shown_as is None else shown_as, help
        )
        value, source = self._raw(name)
        if not source or (empty_is_default and not value.strip()):
            return None
        return value

    def _bad(self, name: str, raw: str, accepts: str, default: T) -> T:
        value = raw if len(raw) <= SHOWN_VALUE_CHARS else raw[:SHOWN_VALUE_CHARS] + "…"
        source = self._raw(name)[1]
        expected = accepts.replace("`", "")  # the reference's code marks, not the console's
        self.errors.append(f"  {name}={value!r} (from {source}): expected {expected}")
        return default

    # --- The reference --------------------------------------------------------------------

    def markdown(self) -> str:
        """The settings reference: a table per section, in the order of the settings."""
        lines = [
            "# Settings reference",
            "",
            "<!-- Generated from hiveproject/settings.py by bin/settings-reference; do not",
            "     edit: tests/test_settings_env.py fails while this file is stale. -->",
            "",
            "Every setting is an environment variable. The service reads it from its",
            "environment, else from `HIVE_DATA_DIR/hive.env` (`KEY=value` lines, as",
            "`manage.py init` writes them), else takes the default. An empty value means the",
            "default, except for text and lists, where it is the empty text or list.",
            "",
            "Booleans and choices are read in any case. A value the service cannot use stops",
            "it at start-up (`manage.py check`, `serve`, `workers`) with an error naming the",
            "variable, its value, where it came from and what is accepted, e.g.",
            "",
            "```",
            *_example_errors(),
            "```",
        ]
        sections: dict[str, list[Variable]] = {}
        for variable in self.variables.values():
            sections.setdefault(variable.section, []).append(variable)
        for title, variables in sections.items():
            lines += ["", f"## {title}", "", "| name | default | accepts | meaning |"]
            lines.append("|---|---|---|---|")
            lines += [
                f"| `{v.name}` | {_cell(v.default)} | {v.accepts} | {v.help} |" for v in variables
            ]
        return "\n".join(lines) + "\n"


def _example_errors() -> list[str]:
    """What the service prints for two bad values, as the reference shows it."""
    example = Env({"DEBUG": "ture", "Q_WORKERS": "-3"})
    example.boolean("DEBUG", False, "")
    example.integer("Q_WORKERS", 3, "", min=1)
    return example.errors


def _bounds(low: float | None, high: float | None, positive: bool = False) -> str:
    if positive:
        return ", above 0" + (f" and at most {in_words(high)}" if high is not None else "")
    if low is not None and high is not None:
        return f" from {in_words(low)} to {in_words(high)}"
    if low is not None:
        return f", at least {in_words(low)}"
    return f", at most {in_words(high)}" if high is not None else ""


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _cell(default: str) -> str:
    """A default in a table cell: code, unless it is a description in words."""
    if default in ("on", "off", "(none)", "(empty)") or " " in default or "`" in default:
        return default
    return f"`{default}`"


def _without_password(url: str) -> str:
    """A URL as an error may show it: a database password stays out of logs."""
    return re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)
