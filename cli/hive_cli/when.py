"""Times as people type them: "tomorrow 9:00", "17:00", "mon 8:30", "+2h", ISO 8601.

Times are in this computer's time zone and go to the server with their UTC offset.
"""

import re
from datetime import date, datetime, time, timedelta

WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?$")
DURATION = re.compile(r"^\+(\d+)\s*(m|min|h|d)$")
ISO_START = re.compile(r"^\d{4}-\d{2}-\d{2}[t ]\d")
UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days"}


class BadTime(ValueError):
    pass


def now() -> datetime:
    return datetime.now().astimezone()


def parse_when(text: str, base: datetime | None = None) -> datetime:
    """An aware datetime. A bare clock time is on ``base``'s day (the start's, for an end),
    else today; "+2h" counts from ``base`` (else from now)."""
    try:
        return _parse(" ".join(text.strip().lower().split()), base or now())
    except OverflowError:  # e.g. "+99999999d": past the year 9999
        raise BadTime(f"{text!r} is too far away.") from None


def _parse(text: str, base: datetime) -> datetime:
    if text == "now":
        return now().replace(microsecond=0)
    duration = DURATION.match(text)
    if duration:
        return base + timedelta(**{UNITS[duration.group(2)]: int(duration.group(1))})
    try:
        return _iso(text)
    except ValueError:
        pass
    day_word, _, clock = text.rpartition(" ")
    return _at(_day(day_word, base), _clock(clock))


def _iso(text: str) -> datetime:
    if not ISO_START.match(text):
        raise ValueError(text)
    value = datetime.fromisoformat(text.upper().replace(" ", "T", 1))
    return value if value.tzinfo else value.astimezone()


def _day(word: str, base: datetime) -> date:
    today = now().date()
    if not word:
        return base.date()
    if word == "today":
        return today
    if word == "tomorrow":
        return today + timedelta(days=1)
    if word[:3] in WEEKDAYS:
        ahead = (WEEKDAYS.index(word[:3]) - today.weekday()) % 7 or 7
        return today + timedelta(days=ahead)
    try:
        return date.fromisoformat(word)
    except ValueError:
        raise BadTime(
            f"{word!r} is not a day: use today, tomorrow, a weekday or 2025-06-02."
        ) from None


def _clock(text: str) -> time:
    match = CLOCK.match(text)
    if not match or int(match.group(1)) > 23 or int(match.group(2) or 0) > 59:
        raise BadTime(
            f"{text!r} is not a time: write e.g. 9:00, 'tomorrow 9:00', 'fri 14:30', '+2h' "
            "or 2025-06-02T09:00."
        )
    return time(int(match.group(1)), int(match.group(2) or 0))


def _at(day: date, clock: time) -> datetime:
    return datetime.combine(day, clock).astimezone()
