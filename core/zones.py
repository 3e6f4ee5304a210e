"""Time zones: the site's (grants, windows, dates) and the calendars' years.

A user's own zone is their profile's (accesscontrol.zones); everything here needs no user.
"""

from datetime import date
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
