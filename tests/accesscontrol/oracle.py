"""A brute-force model of access: one minute at a time, on the local wall clock.

Deliberately written without the production code's interval algebra: each UTC minute is
turned into local time with zoneinfo and checked against dates and windows directly.
"""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

MINUTE = timedelta(minutes=1)


def window_allows(weekdays, start, end, wall: datetime) -> bool:
    today, yesterday, now = wall.weekday(), (wall.weekday() - 1) % 7, wall.time()
    if end > start:
        return today in weekdays and start <= now < end
    # Overnight (or a full day when start == end): the tail belongs to yesterday's window.
    return (today in weekdays and now >= start) or (yesterday in weekdays and now < end)


def rule_allows(valid_from, valid_until, windows, wall: datetime) -> bool:
    if wall.date() < valid_from or (valid_until is not None and wall.date() > valid_until):
        return False
    return not windows or any(window_allows(*w, wall) for w in windows)


def covered_minutes(rules, start: datetime, end: datetime, zone: str) -> set[datetime]:
    """UTC minutes of [start, end) allowed by any rule (valid_from, valid_until, windows)."""
    tz, minutes, cursor = ZoneInfo(zone), set(), start
    while cursor < end:
        wall = cursor.astimezone(tz).replace(tzinfo=None)
        if any(rule_allows(*rule, wall) for rule in rules):
            minutes.add(cursor)
        cursor += MINUTE
    return minutes


def minutes_of(intervals) -> set[datetime]:
    result = set()
    for start, end in intervals:
        assert start.second == start.microsecond == 0 and end.second == end.microsecond == 0
        cursor = start
        while cursor < end:
            result.add(cursor)
            cursor += MINUTE
    return result
