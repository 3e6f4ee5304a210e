"""Mails about reservations: reminders before start and end, and idle reserved GPUs.

Each mail is claimed first by inserting its SentNotification row; the unique constraint
(reservation, kind, device) makes the claim fail for a second sender, so the same event is
never mailed twice however often or in how many workers the schedule runs. If sending
fails, the claim is rolled back with it, and the next run tries again.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from accesscontrol.zones import user_zone
from monitoring.models import GpuMetric, Resolution
from notifications.send import notify

from .calendar import device_label
from .models import Reservation, SentNotification

Kind = SentNotification.Kind
CHAT_EVENTS = {Kind.STARTS: "booking_starts", Kind.ENDS: "booking_ends", Kind.IDLE: "idle_warning"}


def _minutes(name: str) -> timedelta:
    return timedelta(minutes=getattr(settings, name))


def _holding():
    return Reservation.objects.exclude(status=Reservation.Status.CANCELLED).select_related("owner")


def _when(reservation: Reservation, instant: datetime) -> str:
    zone = user_zone(reservation.owner)
    return f"{instant.astimezone(zone):%a %d %b %H:%M} ({zone.key})"


def notify_once(reservation, kind: str, subject: str, body: str, device_key: int = 0) -> bool:
    """Send one mail for this event unless it was sent before; True if sent now."""
    if not reservation.owner.email:
        return False
    try:
        with transaction.atomic():
            SentNotification.objects.create(
                reservation=reservation, kind=kind, device_key=device_key
            )
            send_mail(subject, body, None, [reservation.owner.email])
    except IntegrityError:
        return False  # already sent (or being sent by another worker)
    # The owner's chat channels too (mail went above); once per event, retried on failure.
    key = f"reservation-{reservation.pk}-{kind}-{device_key}"
    notify(reservation.owner, CHAT_EVENTS[kind], key, subject, body, chat_only=True)
    return True


def remind_starts(now: datetime) -> int:
    soon = _holding().filter(
        start__gt=now, start__lte=now + _minutes("RESERVATION_REMIND_START_MINUTES")
    )
    return sum(
        notify_once(
            r,
            Kind.STARTS,
            f"Your reservation '{r.title}' starts soon",
            f"'{r.title}' starts {_when(r, r.start)} and ends {_when(r, r.end)}.",
        )
        for r in soon
    )


def remind_ends(now: datetime) -> int:
    soon = (
        _holding()
        .overlapping(now)
        .filter(end__lte=now + _minutes("RESERVATION_REMIND_END_MINUTES"))
    )
    return sum(
        notify_once(
            r,
            Kind.ENDS,
            f"Your reservation '{r.title}' ends soon",
            f"'{r.title}' ends {_when(r, r.end)}; save your work, "
            "or extend the reservation if the GPUs are still free.",
        )
        for r in soon
    )


def idle_devices(reservation: Reservation, now: datetime) -> list:
    """GPUs of a running reservation whose every raw sample in the idle period is idle."""
    period = _minutes("RESERVATION_IDLE_MINUTES")
    since = now - period
    if reservation.start > since:
        return []  # not running long enough to tell
    threshold = settings.RESERVATION_IDLE_UTILIZATION
    busiest = {}
    for device_id, utilization in GpuMetric.objects.filter(
        device__in=reservation.devices.all(), step=Resolution.RAW, time__gte=since, time__lt=now
    ).values_list("device_id", "utilization_gpu"):
        if utilization is not None:
            busiest[device_id] = max(busiest.get(device_id, 0.0), utilization)
    return [d for d in reservation.devices.all() if d.pk in busiest and busiest[d.pk] < threshold]


def warn_idle(now: datetime) -> int:
    running = _holding().overlapping(now).prefetch_related("devices__host")
    sent = 0
    minutes = settings.RESERVATION_IDLE_MINUTES
    for reservation in running:
        for device in idle_devices(reservation, now):
            sent += notify_once(
                reservation,
                Kind.IDLE,
                f"Reserved GPU {device_label(device)} is idle",
                f"GPU {device_label(device)} of your reservation '{reservation.title}' has been "
                f"idle for {minutes} minutes. If you no longer need it, cancel or shorten the "
                "reservation so others can use it.",
                device_key=device.pk,
            )
    return sent


def send_due(now: datetime | None = None) -> dict[str, int]:
    now = now or timezone.now()
    return {"starts": remind_starts(now), "ends": remind_ends(now), "idle": warn_idle(now)}
