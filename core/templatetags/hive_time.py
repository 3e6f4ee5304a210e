"""One way to show time on every page: absolute, in the user's zone (activated per request by
accesscontrol.zones), "Thu 26 Nov 14:05", with a relative hint ("in 2 h", "5 min ago") where it
helps, and durations in words ("2 h 5 min")."""

from datetime import date, datetime, timedelta
from typing import Literal

from django import template
from django.utils import timezone
from django.utils.html import format_html

register = template.Library()

DAY_FORMAT = "%a %d %b"
FORMAT = f"{DAY_FORMAT} %H:%M"


def absolute(moment: datetime) -> str:
    local = timezone.localtime(moment)
    text = local.strftime(FORMAT)
    return text if local.year == timezone.localtime().year else f"{text} {local.year}"


def duration_text(delta: timedelta) -> str:
    minutes = int(abs(delta.total_seconds()) // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min" if minutes else "under a minute"


def relative(moment: datetime, now: datetime | None = None) -> str:
    delta = moment - (now or timezone.now())
    if abs(delta) < timedelta(minutes=1):
        return "now"
    words = duration_text(delta)
    return f"in {words}" if delta > timedelta(0) else f"{words} ago"


@register.filter
def when(moment: datetime | None) -> str:
    """<time> with the absolute time and, in its title and after it, the relative one."""
    if not moment:
        return "–"
    return format_html(
        '<time class="hive-time" datetime="{}" title="{}">{}</time>',
        moment.isoformat(),
        relative(moment),
        absolute(moment),
    )


@register.filter
def when_relative(moment: datetime | None) -> str:
    """Absolute time followed by the relative hint: "Thu 26 Nov 14:05 (in 2 h)"."""
    if not moment:
        return "–"
    return format_html(
        '<time class="hive-time" datetime="{}">{} ({})</time>',
        moment.isoformat(),
        absolute(moment),
        relative(moment),
    )


@register.filter
def duration(value: timedelta | float | Literal[""] | None) -> str:
    """A timedelta or a number of seconds, in words ("" is a template's missing value)."""
    if value is None or value == "":
        return "–"
    return duration_text(value if isinstance(value, timedelta) else timedelta(seconds=value))


@register.filter
def day(value: date | None) -> str:
    """A calendar day in the format of the times: "Thu 26 Nov" (with the year if not this one)."""
    if not value:
        return "–"
    if isinstance(value, datetime):
        value = timezone.localtime(value).date()
    text = value.strftime(DAY_FORMAT)
    return text if value.year == timezone.localdate().year else f"{text} {value.year}"
