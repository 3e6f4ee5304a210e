"""Daily figures per GPU and user, computed from the monitoring history and the bookings.

Each second of a GPU's day (site zone; today: up to now) is charged to at most one person,
its **holder**: the owner of the booking holding the GPU then, else the owner of a job task
running on it, else nobody. A job inside someone's booking is the booking owner's time.

- **reserved**: time the user's bookings (not cancelled) held the GPU, from their times;
- **unbooked**: time the user's tasks held the GPU outside any booking, from their times;
- **used**: sampled time with utilisation at or above RESERVATION_IDLE_UTILIZATION;
- **idle**: sampled time under it while the user's booking held the GPU (a task's time
  outside a booking is never idle: nothing was booked and left unused);
- **energy**: each sample's power × the time it stands for.

Each stored sample stands for its step (raw: MONITORING_HISTORY_STEP seconds; minute and
hour averages: their step), cut short where the next sample of the GPU begins, the finest
tier winning where tiers overlap, as in reservations.usage. Time without a sample (the
host down, a gap in monitoring) counts as neither used, idle nor energy: the figures never
invent what was not measured.

The invariants (tests/accounting/test_invariants.py checks them with hypothesis), per GPU
and day, for every user U:

1. idle(U) + the used time within U's bookings <= reserved(U); so idle <= reserved.
2. used(U) + idle(U) <= reserved(U) + unbooked(U); nobody's row has only used and energy.
3. the reserved and unbooked time of all users together <= the length of the day counted;
   used and idle of all rows together <= the sampled time <= that length (no second is
   counted twice, however samples of tiers or extra probes overlap).
4. every figure is >= 0.

Sums over GPUs, days, groups and hosts keep 1 and 2 for every report line, and rounding
each figure the same way keeps them too.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from itertools import pairwise

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.zones import site_zone
from jobs.models import Task
from monitoring.models import Device, GpuMetric, Resolution
from reservations.models import Reservation, ReservedDevice

from .models import DailyUsage

FIELDS = ("reserved_seconds", "unbooked_seconds", "used_seconds", "idle_seconds", "energy_wh")


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


@dataclass(frozen=True)
class Hold:
    """A booking (``booked``) or a task of ``owner`` holding one GPU over [since, until)."""

    since: datetime
    until: datetime
    owner: int | None
    booked: bool


def holders(start: datetime, end: datetime) -> dict[int, list[Hold]]:
    """Device id -> the bookings and tasks holding it within [start, end)."""
    held = defaultdict(list)
    slots = ReservedDevice.objects.holding(start, end).exclude(
        reservation__status=Reservation.Status.CANCELLED
    )
    for device, since, until, owner in slots.values_list(
        "device_id", "start", "end", "reservation__owner_id"
    ):
        held[device].append(Hold(since, until, owner, True))
    tasks = Task.objects.filter(started_at__lt=end).exclude(ended_at__lte=start)
    for device, since, until, owner in tasks.values_list(
        "devices", "started_at", "ended_at", "job__owner_id"
    ):
        if device is not None:
            held[device].append(Hold(since, until or end, owner, False))
    return held


def charged_spans(holds: list[Hold], start: datetime, end: datetime) -> list[tuple]:
    """[start, end) cut where a hold begins or ends, as (from, until, owner, booked) pieces
    in time order; a piece nobody holds has owner None. A booking outranks a task (a job
    inside someone's booking is the booking owner's time), then the earlier start."""
    ranked = sorted(holds, key=lambda h: (not h.booked, h.since))
    cuts = sorted({start, end} | {t for h in holds for t in (h.since, h.until) if start < t < end})
    spans = []
    for since, until in pairwise(cuts):
        holder = next((h for h in ranked if h.since <= since and until <= h.until), None)
        owner, booked = (holder.owner, holder.booked) if holder else (None, False)
        spans.append((since, until, owner, booked))
    return spans


def sample_spans(samples: list[tuple], end: datetime) -> list[tuple]:
    """(from, until, utilisation, power) per sample, each cut short where the next sample of
    the GPU begins (tiers or extra probes may overlap) and at ``end``."""
    ordered = sorted(samples, key=lambda s: s[0])
    nexts = [s[0] for s in ordered[1:]] + [end]
    spans = []
    for (at, seconds, utilization, power), following in zip(ordered, nexts, strict=False):
        until = min(at + timedelta(seconds=seconds), following, end)
        if until > at:
            spans.append((at, until, utilization, power))
    return spans


def charge(holds: list[Hold], samples: list[tuple], start, end, threshold) -> dict:
    """One GPU's figures over [start, end): owner id (None: nobody) -> FIELDS' values.
    ``samples``: (time, seconds it stands for, utilisation, power) with time in [start, end)."""
    totals = defaultdict(lambda: dict.fromkeys(FIELDS, 0.0))
    spans = charged_spans(holds, start, end)
    for since, until, owner, booked in spans:
        if owner is not None:
            field = "reserved_seconds" if booked else "unbooked_seconds"
            totals[owner][field] += (until - since).total_seconds()
    for since, until, utilization, power, owner, booked in overlaps(
        sample_spans(samples, end), spans
    ):
        seconds, row = (until - since).total_seconds(), totals[owner]
        if utilization is not None and utilization >= threshold:
            row["used_seconds"] += seconds
        elif utilization is not None and booked:
            row["idle_seconds"] += seconds
        if power is not None:
            row["energy_wh"] += power * seconds / 3600
    return totals


def overlaps(samples: list[tuple], spans: list[tuple]):
    """(from, until, utilisation, power, owner, booked) where a sample meets a charged span;
    both lists are in time order and each is free of overlaps (one walk through both)."""
    i = 0
    for at, until, utilization, power in samples:
        while i < len(spans) and spans[i][1] <= at:
            i += 1
        j = i
        while j < len(spans) and spans[j][0] < until:
            since, span_end, owner, booked = spans[j]
            yield max(at, since), min(until, span_end), utilization, power, owner, booked
            j += 1


def figures(day: date, now: datetime) -> dict[tuple[int, int | None], dict[str, float]]:
    """(device id, user id) -> the day's figures."""
    start, end = day_bounds(day)
    end = min(end, now)
    totals = {}
    if end <= start:
        return totals
    held, sampled = holders(start, end), history(start, end)
    threshold = settings.RESERVATION_IDLE_UTILIZATION
    for device in held.keys() | sampled.keys():
        charged = charge(held.get(device, []), sampled.get(device, []), start, end, threshold)
        totals.update({(device, owner): values for owner, values in charged.items()})
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
