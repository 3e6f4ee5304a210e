"""Daily figures per GPU and user, computed from the monitoring history and the bookings.

- **reserved**: the time each booking (not cancelled) held the GPU, from its times.
- **used**: sampled time with utilisation at or above RESERVATION_IDLE_UTILIZATION;
  **idle**: sampled time under it while a booking held the GPU.
- **energy**: each sample's power × the time it stands for.

Each stored sample stands for its step (raw: MONITORING_HISTORY_STEP seconds; minute and
hour averages: their step), the finest tier winning where tiers overlap, as in
reservations.usage. Time without a sample (the host down, a gap in monitoring) counts as
neither used, idle nor energy: the figures never invent what was not measured.

A sample's time is charged to whoever held the GPU then: the owner of the booking holding
it, else the owner of a job task running on it, else nobody.
"""

from collections import defaultdict
from datetime import date, datetime, time, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accesscontrol.models import site_zone
from jobs.models import Task
from monitoring.models import Device, GpuMetric, Resolution
from reservations.models import Reservation, ReservedDevice

from .models import DailyUsage

FIELDS = ("reserved_seconds", "used_seconds", "idle_seconds", "energy_wh")


def day_bounds(day: date) -> tuple[datetime, datetime]:
    zone = site_zone()
    start = datetime.combine(day, time(), tzinfo=zone)
    return start, datetime.combine(day + timedelta(days=1), time(), tzinfo=zone)


def seconds_of(step: int) -> float:
    return float(settings.MONITORING_HISTORY_STEP) if step == Resolution.RAW else float(step)


def history(start: datetime, end: datetime) -> dict[int, list[tuple]]:
    """Device id -> (time, seconds, utilisation, power) samples, finest tier first."""
    rows = defaultdict(list)
    for step in (Resolution.RAW, Resolution.MINUTE, Resolution.HOUR):
        samples = GpuMetric.objects.filter(step=step, time__gte=start, time__lt=end).values_list(
            "device_id", "time", "utilization_gpu", "power_w"
        )
        finer_from = {device: min(t for t, *_ in kept) for device, kept in rows.items() if kept}
        span = timedelta(seconds=seconds_of(step))
        for device, at, utilization, power in samples:
            bound = finer_from.get(device)
            if bound is None or at + span <= bound:  # coarser tiers only fill in before
                rows[device].append((at, seconds_of(step), utilization, power))
    return rows


def holders(start: datetime, end: datetime) -> dict[int, list[tuple]]:
    """Device id -> (from, until, user id, is a booking) intervals overlapping [start, end)."""
    held = defaultdict(list)
    slots = ReservedDevice.objects.holding(start, end).exclude(
        reservation__status=Reservation.Status.CANCELLED
    )
    for device, since, until, owner in slots.values_list(
        "device_id", "start", "end", "reservation__owner_id"
    ):
        held[device].append((since, until, owner, True))
    tasks = Task.objects.filter(started_at__lt=end).exclude(ended_at__lte=start)
    for device, since, until, owner in tasks.values_list(
        "devices", "started_at", "ended_at", "job__owner_id"
    ):
        if device is not None:
            held[device].append((since, until or end, owner, False))
    # Bookings first: a job inside someone's booking is charged to the booking's owner.
    for intervals in held.values():
        intervals.sort(key=lambda i: not i[3])
    return held


def holder_at(intervals: list[tuple], at: datetime) -> tuple[int | None, bool]:
    for since, until, owner, booked in intervals:
        if since <= at < until:
            return owner, booked
    return None, False


def figures(day: date, now: datetime) -> dict[tuple[int, int | None], dict[str, float]]:
    """(device id, user id) -> the day's figures."""
    start, end = day_bounds(day)
    end = min(end, now)
    totals = defaultdict(lambda: dict.fromkeys(FIELDS, 0.0))
    if end <= start:
        return totals
    held = holders(start, end)
    threshold = settings.RESERVATION_IDLE_UTILIZATION
    for device, intervals in held.items():
        for since, until, owner, booked in intervals:
            if booked:
                overlap = min(until, end) - max(since, start)
                totals[device, owner]["reserved_seconds"] += max(overlap.total_seconds(), 0)
    for device, samples in history(start, end).items():
        for at, seconds, utilization, power in samples:
            owner, booked = holder_at(held.get(device, []), at)
            row = totals[device, owner]
            if utilization is not None and utilization >= threshold:
                row["used_seconds"] += seconds
            elif utilization is not None and booked:
                row["idle_seconds"] += seconds
            if power is not None:
                row["energy_wh"] += power * seconds / 3600
    return totals


@transaction.atomic
def compute_day(day: date, now: datetime | None = None) -> int:
    """(Re)write one day's rows; returns how many."""
    totals = figures(day, now or timezone.now())
    DailyUsage.objects.filter(day=day).delete()
    known = set(Device.objects.filter(pk__in={d for d, _ in totals}).values_list("pk", flat=True))
    DailyUsage.objects.bulk_create(
        DailyUsage(day=day, device_id=device, user_id=user, **values)
        for (device, user), values in totals.items()
        if device in known and any(values.values())
    )
    return DailyUsage.objects.filter(day=day).count()


def compute_recent(now: datetime | None = None) -> int:
    """Today so far and yesterday (late samples and bookings ended early change it)."""
    now = now or timezone.now()
    today = now.astimezone(site_zone()).date()
    return sum(compute_day(d, now) for d in (today - timedelta(days=1), today))
