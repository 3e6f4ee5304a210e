"""Time zones: the site's (grants, windows, dates), the calendars' years, and wall-clock text.

A user's own zone is their profile's (accesscontrol.zones); everything here needs no user.
"""

from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone


def validate_time_zone(value: str) -> None:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationError(f"{value!r} is not a known time zone (e.g. Europe/Warsaw).") from None


def site_zone() -> ZoneInfo:
    """The zone weekly windows and grant dates are read in (read per call: tests change it)."""
    return ZoneInfo(settings.SITE_TIME_ZONE)


def site_today() -> date:
    return timezone.localdate(timezone=site_zone())


# Dates people may ask the calendars about: far from datetime's limits (years 1 and 9999),
# so moving a time into another zone or a few weeks on cannot overflow into a 500.
CALENDAR_YEARS = range(1900, 9001)


def check_calendar_year(value: date, field: str | None = None) -> None:
    """A validator (of a form field), or with ``field`` an error naming that field."""
    if value.year not in CALENDAR_YEARS:
        first, last = CALENDAR_YEARS[0], CALENDAR_YEARS[-1]
        message = f"Give a date between the years {first} and {last}."
        raise ValidationError({field: message} if field else message)


def wall_text(instant: datetime, zone: ZoneInfo) -> str:
    """'2026-11-23T09:00:00': the wall-clock time in ``zone``, without an offset.

    The calendar script only knows fixed offsets, so it is given wall-clock times that it
    shows as they are; this keeps a week across a DST change right.
    """
    return instant.astimezone(zone).replace(tzinfo=None).isoformat(timespec="seconds")


def parse_wall(text: object, zone: ZoneInfo, field: str) -> datetime:
    """An ISO time from the calendar: wall-clock in ``zone`` unless it names an offset."""
    try:
        value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(
            {field: f"{text!r} is not a date and time (YYYY-MM-DDTHH:MM)."}
        ) from None
    check_calendar_year(value, field)
    if timezone.is_naive(value):
        value = value.replace(tzinfo=zone)
    return value
