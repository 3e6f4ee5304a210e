"""Tables and colours for people; click drops the colours when output is not a terminal."""

import os
from datetime import datetime

import click

from .when import now


def counted(number: int, noun: str) -> str:
    """'1 GPU', '2 GPUs': a count in plain English (nouns that take an s)."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def paint(text: str, **style) -> str:
    """Styled text, unless NO_COLOR is set (https://no-color.org)."""
    return text if os.environ.get("NO_COLOR") else click.style(text, **style)


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns padded by their visible width (colour codes do not count)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(click.unstyle(cell))) for w, cell in zip(widths, row, strict=True)]
    lines = [_line([paint(h, bold=True) for h in headers], widths)]
    lines += [_line(row, widths) for row in rows]
    return "\n".join(lines)


def _line(cells: list[str], widths: list[int]) -> str:
    padded = [c + " " * (w - len(click.unstyle(c))) for c, w in zip(cells, widths, strict=True)]
    return "  ".join(padded).rstrip()


def when(text: str | None) -> str:
    """A server time in this computer's zone; the date only when it is not today."""
    if not text:
        return "-"
    moment = datetime.fromisoformat(text).astimezone()
    if moment.date() == now().date():
        return moment.strftime("%H:%M")
    return moment.strftime("%a %Y-%m-%d %H:%M")


def percent(value) -> str:
    if value is None:
        return "-"
    colour = "green" if value < 30 else "yellow" if value < 70 else "red"
    return paint(f"{value:>3}%", fg=colour)


def memory(used, total) -> str:
    if used is None:
        return "-" if total is None else f"?/{total} MiB"
    return f"{used}/{total if total is not None else '?'} MiB"


def status_word(status: str) -> str:
    colours = {"running": "cyan", "pending": "yellow", "failed": "red", "succeeded": "green"}
    return paint(status, fg=colours.get(status))
