"""A user's reservations as an iCalendar (RFC 5545) feed, written by hand: it is small."""

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from .calendar import device_label
from .models import CalendarFeed, Reservation

# Old bookings stay in the feed for a while, so calendar apps keep recent history.
HISTORY = timedelta(days=90)


def feed_for(user) -> CalendarFeed:
    return CalendarFeed.objects.get_or_create(user=user)[0]


def renew_feed(user) -> CalendarFeed:
    """A new secret: the old URL stops working at once."""
    feed = feed_for(user)
    feed.token = CalendarFeed._meta.get_field("token").default()
    feed.save(update_fields=["token"])
    return feed


def _escape(text: str) -> str:
    text = text.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,")
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")


def fold(line: str) -> str:
    """At most 75 octets per line, continued with a leading space (RFC 5545 3.1)."""
    pieces, current, limit = [], "", 75
    for char in line:
        if len((current + char).encode()) > limit:
            pieces.append(current)
            current, limit = "", 74  # continuation lines start with a space
        current += char
    return "\r\n ".join([*pieces, current])


def _stamp(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _event(reservation: Reservation, now: datetime) -> list[str]:
    gpus = ", ".join(device_label(d) for d in reservation.devices.all())
    status = "CANCELLED" if reservation.status == Reservation.Status.CANCELLED else "CONFIRMED"
    if reservation.status == Reservation.Status.PENDING:
        status = "TENTATIVE"
    description = f"GPUs: {gpus}\n{reservation.description}".strip()
    return [
        "BEGIN:VEVENT",
        f"UID:reservation-{reservation.pk}@{urlsplit(settings.PUBLIC_URL).netloc}",
        f"DTSTAMP:{_stamp(now)}",
        f"LAST-MODIFIED:{_stamp(reservation.updated)}",
        f"DTSTART:{_stamp(reservation.start)}",
        f"DTEND:{_stamp(reservation.end)}",
        f"SUMMARY:{_escape(reservation.title)}",
        f"DESCRIPTION:{_escape(description)}",
        f"LOCATION:{_escape(gpus)}",
        f"STATUS:{status}",
        "END:VEVENT",
    ]


def feed_text(user) -> str:
    now = timezone.now()
    reservations = Reservation.objects.filter(owner=user, end__gte=now - HISTORY).prefetch_related(
        "devices__host"
    )
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//GPU Hive//reservations//EN"]
    lines += ["CALSCALE:GREGORIAN", f"X-WR-CALNAME:{_escape(f'GPU reservations of {user}')}"]
    for reservation in reservations:
        lines += _event(reservation, now)
    lines.append("END:VCALENDAR")
    return "".join(fold(line) + "\r\n" for line in lines)
