"""Times as each user reads them: in their profile's time zone, else the site's."""

from datetime import datetime
from zoneinfo import ZoneInfo

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError
from django.utils import timezone

from accesscontrol.models import Profile, check_calendar_year, site_zone


def user_zone(user: AbstractBaseUser | AnonymousUser) -> ZoneInfo:
    """The user's own zone (Profile.time_zone), else the site zone. A page's request reads it
    once: board.middleware keeps it on the request's user as ``hive_zone``."""
    known = getattr(user, "hive_zone", None)
    if isinstance(known, ZoneInfo):
        return known
    if isinstance(user, AnonymousUser):  # no profile
        return site_zone()
    name = Profile.objects.filter(user_id=user.pk).values_list("time_zone", flat=True).first()
    return ZoneInfo(name) if name else site_zone()


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
