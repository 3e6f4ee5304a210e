"""The shell the service runs on hosts, kept in ``.sh`` files beside the modules that send it.

An app's host-side scripts live in its ``scripts/`` folder, written for POSIX sh (dash is
/bin/sh on Debian and Ubuntu) and checked by shellcheck in the suite (tests/test_shellcheck.py).
Each is sent as the text of ``sh -c SCRIPT NAME ARG...``: values travel only as its
positional parameters, never inside its text.

What a host gets is the file's text with two changes, made once, when a module loads it:

- a line ``. ./OTHER.sh`` is replaced by the text of OTHER.sh from the same folder, as
  sourcing it would do: a part two scripts share is written once, and shellcheck reads it
  as the source it names;
- comment lines and blank lines are left out: the reasons stay in the file, and the text
  sent on every call (and shown by ``ps`` while a task's window runs) stays short. A comment
  line is one whose first non-blank character is ``#``; no script has one inside a quoted
  string, nor a blank line there.
"""

import functools
import re
from importlib import resources
from importlib.resources.abc import Traversable

FOLDER = "scripts"
_INCLUDE = re.compile(r"\. \./([\w-]+\.sh)")


@functools.cache
def load(package: str, name: str) -> str:
    """The text of ``PACKAGE/scripts/NAME`` as hosts are given it (see above)."""
    return _text(resources.files(package) / FOLDER, name)


def _text(folder: Traversable, name: str) -> str:
    lines = []
    for line in (folder / name).read_text(encoding="utf-8").splitlines():
        if included := _INCLUDE.fullmatch(line.strip()):
            lines.append(_text(folder, included[1]).rstrip("\n"))
        elif line.strip() and not line.lstrip().startswith("#"):
            lines.append(line)
    return "\n".join(lines) + "\n"
