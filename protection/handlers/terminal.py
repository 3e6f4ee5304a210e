"""Tell the offender on their terminals on that host, ``write``-style."""

import re

from monitoring.connections import pool

from . import Skip, texts

# What `who` may name as a terminal: "pts/3", "tty1". Anything else is not passed on.
TTY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9/_-]*$")


def terminals(who_output: str, user: str) -> list[str]:
    """The user's terminals from `who` output ("NAME LINE TIME [COMMENT]" per line)."""
    ttys = []
    for line in who_output.splitlines():
        fields = line.split()
        if (
            len(fields) >= 2
            and fields[0] == user
            and TTY.match(fields[1])
            and ".." not in fields[1]
        ):
            if fields[1] not in ttys:
                ttys.append(fields[1])
    return ttys


def write_to_terminals(violation, timeout: float = 10, **options) -> str:
    """Run ``write USER TTY`` for each terminal the offender has open, the text on stdin.

    Nothing happens (recorded as skipped) when the owner is unknown or has no terminal.
    """
    user = violation.offender_unix
    if not user:
        raise Skip("owner unknown: no terminal to write to")
    host = violation.device.host
    ttys = terminals(pool.run(host, ["who"], timeout=timeout).stdout, user)
    if not ttys:
        raise Skip(f"{user} has no terminal open on {host.name}")
    text = texts.to_offender(violation)
    written = [
        tty for tty in ttys if pool.run(host, ["write", user, tty], timeout=timeout, stdin=text).ok
    ]
    if not written:
        raise RuntimeError(f"write failed on every terminal of {user}: {', '.join(ttys)}")
    return f"written to {user} on {', '.join(written)}"
