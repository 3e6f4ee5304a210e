"""Notices about reservations: reminders before start and end, and idle reserved GPUs, told
to the owner on their notification channels (mail unless they chose otherwise).

Each notice has one key per event (reservation, kind, GPU); the notifications app records
it once per channel however often or in how many workers the schedule runs (the unique
(channel, key) of its deliveries), and its sender sends it, again after a failure.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from accesscontrol.zones import user_zone
from monitoring.models import GpuMetric, Resolution
from notifications.send import notify

from .calendar import device_label
from .models import Reservation

STARTS, ENDS, IDLE = "starts", "ends", "idle"
EVENTS = {STARTS: "booking_starts", ENDS: "booking_ends", IDLE: "idle_warning"}


def notice_key(reservation_id: int, kind: str, device_id: int = 0) -> str:
    """The notice's identity; the device is 0 for the reservation as a whole. (Migration
    reservations 0006 wrote the notices sent before in this form: keep them alike.)"""
    return f"reservation-{reservation_id}-{kind}-{device_id}"


def _minutes(name: str) -> timedelta:
    return timedelta(minutes=getattr(settings, name))


def _holding():
    return Reservation.objects.exclude(status=Reservation.Status.CANCELLED).select_related("owner")


def _when(reservation: Reservation, instant: datetime) -> str:
    zone = user_zone(reservation.owner)
    return f"{instant.astimezone(zone):%a %d %b %H:%M} ({zone.key})"


def notify_once(reservation, kind: str, subject: str, body: str, device_key: int = 0) -> bool:
    """Tell the owner about this event unless it was told before; True if told now."""
    key = notice_key(reservation.pk, kind, device_key)
    return bool(notify(reservation.owner, EVENTS[kind], key, subject, body))


def remind_starts(now: datetime) -> int:
    soon = _holding().filter(
        start__gt=now, start__lte=now + _minutes("RESERVATION_REMIND_START_MINUTES")
    )
    return sum(
        notify_once(
            r,
            STARTS,
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
            ENDS,
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
                IDLE,
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
