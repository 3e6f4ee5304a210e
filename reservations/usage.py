"""How a reservation's GPUs were used, from the monitoring history.

Memory is the memory *used* (MiB), not nvidia-smi's "memory utilisation", which is the
memory controller's busy time and is often mistaken for it. Each stored sample stands for
its step (raw: MONITORING_HISTORY_STEP seconds, then minute and hour averages); the finest
tier wins where tiers overlap, so pruned raw samples are replaced by their averages.
"""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from monitoring.models import GpuMetric, Resolution

from .models import Reservation


@dataclass(frozen=True)
class Usage:
    utilization: float | None  # average GPU %, over the samples
    memory_mib: float | None  # average memory used
    idle_minutes: float  # GPU-minutes below the idle threshold
    busy_minutes: float  # GPU-minutes at or above it
    final: bool = False

    @property
    def sampled_minutes(self) -> float:
        return self.idle_minutes + self.busy_minutes


def idle_below() -> float:
    return float(settings.RESERVATION_IDLE_UTILIZATION)


def _seconds_per_sample(step: int) -> float:
    return float(settings.MONITORING_HISTORY_STEP) if step == Resolution.RAW else float(step)


def samples(device_ids, start: datetime, end: datetime) -> list[tuple]:
    """(step, utilization, memory) rows covering [start, end), finest tier first."""
    rows, bound = [], end
    for step in (Resolution.RAW, Resolution.MINUTE, Resolution.HOUR):
        tier = list(
            GpuMetric.objects.filter(
                device_id__in=device_ids, step=step, time__gte=start, time__lt=bound
            ).values_list("time", "utilization_gpu", "memory_used_mib")
        )
        rows += [(step, u, m) for _, u, m in tier]
        if tier:
            bound = min(t for t, _, _ in tier)  # coarser tiers only fill in before this
    return rows


def summarise(rows: list[tuple], final: bool = False) -> Usage:
    idle = busy = weight_u = weight_m = sum_u = sum_m = 0.0
    threshold = idle_below()
    for step, utilization, memory in rows:
        seconds = _seconds_per_sample(step)
        if utilization is not None:
            sum_u += utilization * seconds
            weight_u += seconds
            if utilization < threshold:
                idle += seconds
            else:
                busy += seconds
        if memory is not None:
            sum_m += memory * seconds
            weight_m += seconds
    return Usage(
        utilization=round(sum_u / weight_u, 1) if weight_u else None,
        memory_mib=round(sum_m / weight_m) if weight_m else None,
        idle_minutes=round(idle / 60, 1),
        busy_minutes=round(busy / 60, 1),
        final=final,
    )


def has_run(reservation: Reservation, now: datetime) -> bool:
    return reservation.status != Reservation.Status.CANCELLED and reservation.start < now


def usage_of(reservation: Reservation, now: datetime | None = None) -> Usage | None:
    """Stored figures once final, else live ones; None for a booking that has not begun."""
    now = now or timezone.now()
    if reservation.usage_final:
        return stored_usage(reservation)
    if not has_run(reservation, now):
        return None
    device_ids = [d.pk for d in reservation.devices.all()]
    return summarise(samples(device_ids, reservation.start, min(reservation.end, now)))


def stored_usage(reservation: Reservation) -> Usage | None:
    if reservation.idle_minutes is None:
        return None
    return Usage(
        reservation.used_utilization,
        reservation.used_memory_mib,
        reservation.idle_minutes,
        reservation.busy_minutes or 0.0,
        final=True,
    )


@transaction.atomic
def finalise(reservation: Reservation) -> None:
    usage = usage_of(reservation, reservation.end)
    reservation.usage_final = True
    if usage is not None:
        reservation.used_utilization = usage.utilization
        reservation.used_memory_mib = usage.memory_mib
        reservation.idle_minutes = usage.idle_minutes
        reservation.busy_minutes = usage.busy_minutes
    reservation.save(
        update_fields=[
            "usage_final",
            "used_utilization",
            "used_memory_mib",
            "idle_minutes",
            "busy_minutes",
        ]
    )


def finalise_ended(now: datetime | None = None) -> int:
    """Store the figures of every reservation that ended and has none yet (scheduled)."""
    now = now or timezone.now()
    ended = Reservation.objects.filter(end__lte=now, usage_final=False).prefetch_related("devices")
    count = 0
    for reservation in ended:
        finalise(reservation)
        count += 1
    return count
