"""Metric history: raw samples bulk-inserted per cycle, then minute and hour averages.

Three series: per GPU (and MIG slice), per host (CPU, RAM) and per host and disk path.

Raw samples are kept for ``MONITORING_RAW_RETENTION_HOURS`` (24), minute averages for
``MONITORING_MINUTE_RETENTION_DAYS`` (30), hour averages for
``MONITORING_HOUR_RETENTION_DAYS`` (400). Averages are built only for steps that ended a
grace period ago, so a cycle still being stored is never left out of its average.
"""

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Max, Min
from django.db.models.functions import TruncHour, TruncMinute
from django.utils import timezone

from core.lease import record_failure, record_success

from .bulk import insert_many
from .models import Device, DiskMetric, GpuMetric, Host, HostMetric, Resolution
from .probes import ProbeResult

GPU_FIELDS = [
    "utilization_gpu",
    "utilization_memory",
    "memory_used_mib",
    "temperature_c",
    "power_w",
]
HOST_FIELDS = ["cpu_utilization", "memory_used_mib", "memory_total_mib"]
DISK_FIELDS = ["used_mib", "total_mib"]
# (model, the fields naming whose metric it is, value fields)
SERIES = [
    (GpuMetric, ["device_id"], GPU_FIELDS),
    (HostMetric, ["host_id"], HOST_FIELDS),
    (DiskMetric, ["host_id", "path"], DISK_FIELDS),
]
TIERS = [(Resolution.RAW, Resolution.MINUTE), (Resolution.MINUTE, Resolution.HOUR)]
TRUNC = {Resolution.MINUTE: TruncMinute, Resolution.HOUR: TruncHour}
# Source rows aggregated per query: bounds memory after a long pause.
CHUNK = {Resolution.MINUTE: timedelta(hours=1), Resolution.HOUR: timedelta(days=1)}
GRACE = timedelta(seconds=30)
RETENTION_ACTIVITY = "history-retention"


def store_samples(probed: list[tuple[Host, ProbeResult]], now: datetime) -> int:
    """Bulk-insert one raw sample per reachable host and per GPU seen; returns rows added."""
    reachable = [(host, result) for host, result in probed if result.reachable]
    devices = _device_ids([host.pk for host, _ in reachable])
    host_rows, gpu_rows, disk_rows = [], [], []
    for host, result in reachable:
        host_rows.append(_host_row(host, result, now))
        disk_rows += [_disk_row(host, disk, now) for disk in result.disks]
        # A MIG slice has a series of its own: its memory (nvidia-smi gives no more of it).
        for gpu in [*(result.gpus or []), *(result.slices or [])]:
            device_id = devices.get((host.pk, gpu.uuid))
            if device_id is not None:
                gpu_rows.append(_gpu_row(device_id, gpu, now))
    insert_many(HostMetric, host_rows)
    insert_many(GpuMetric, gpu_rows)
    insert_many(DiskMetric, disk_rows)
    return len(host_rows) + len(gpu_rows) + len(disk_rows)


def _device_ids(host_ids: list[int]) -> dict[tuple[int, str], int]:
    rows = Device.objects.filter(host_id__in=host_ids).values_list("host_id", "uuid", "pk")
    return {(host_id, uuid): pk for host_id, uuid, pk in rows}


def _host_row(host: Host, result: ProbeResult, now: datetime) -> HostMetric:
    return HostMetric(
        host_id=host.pk,
        time=now,
        cpu_utilization=result.cpu.get("utilization"),
        memory_used_mib=result.cpu.get("memory_used_mib"),
        memory_total_mib=result.cpu.get("memory_total_mib"),
    )


def _disk_row(host: Host, disk, now: datetime) -> DiskMetric:
    return DiskMetric(
        host_id=host.pk, path=disk.path, time=now, used_mib=disk.used_mib, total_mib=disk.total_mib
    )


def _gpu_row(device_id: int, gpu, now: datetime) -> GpuMetric:
    return GpuMetric(
        device_id=device_id,
        time=now,
        utilization_gpu=gpu.utilization_gpu,
        utilization_memory=gpu.utilization_memory,
        memory_used_mib=gpu.memory_used_mib,
        temperature_c=gpu.temperature_c,
        power_w=gpu.power_w,
    )


def floor_time(moment: datetime, step: int) -> datetime:
    """The start of the step (in UTC) that contains moment."""
    seconds = int(moment.timestamp()) // step * step
    return datetime.fromtimestamp(seconds, UTC)


def downsample(now: datetime | None = None) -> int:
    """Average every finished minute of raw samples, then every finished hour of minutes."""
    now = now or timezone.now()
    created = 0
    for source, target in TIERS:
        for model, keys, fields in SERIES:
            created += _downsample(model, keys, fields, source, target, now)
    return created


def _downsample(model, keys, fields, source, target, now) -> int:
    end = floor_time(now - GRACE, target)
    start = _next_unaveraged(model, source, target)
    created = 0
    while start is not None and start < end:
        stop = min(end, start + CHUNK[target])
        created += _average(model, keys, fields, source, target, start, stop)
        start = _first_source_step(model, source, target, stop)
    return created


def _next_unaveraged(model, source, target) -> datetime | None:
    """Where averaging resumes: after the newest average, else at the oldest source row."""
    latest = model.objects.filter(step=target).aggregate(t=Max("time"))["t"]
    if latest is not None:
        return _first_source_step(model, source, target, latest + timedelta(seconds=target))
    return _first_source_step(model, source, target, None)


def _first_source_step(model, source, target, since) -> datetime | None:
    """The start of the first step holding source rows at or after since (skips gaps)."""
    rows = model.objects.filter(step=source)
    if since is not None:
        rows = rows.filter(time__gte=since)
    first = rows.aggregate(t=Min("time"))["t"]
    return floor_time(first, target) if first is not None else None


def _average(model, keys, fields, source, target, start, stop) -> int:
    averages = (
        model.objects.filter(step=source, time__gte=start, time__lt=stop)
        .annotate(bucket=TRUNC[target]("time", tzinfo=UTC))
        .values(*keys, "bucket")
        .annotate(**{f"avg_{f}": Avg(f) for f in fields})
        .order_by()
    )
    rows = [
        model(step=target, time=a["bucket"], **{k: a[k] for k in keys}, **_values(a, fields))
        for a in averages
    ]
    model.objects.bulk_create(rows, batch_size=500)
    return len(rows)


def _values(average: dict, fields: list[str]) -> dict:
    return {f: average[f"avg_{f}"] for f in fields}


def retention_limits(now: datetime) -> dict[int, datetime]:
    """Rows of each tier older than this are deleted."""
    raw_hours = settings.MONITORING_RAW_RETENTION_HOURS
    minute_days = settings.MONITORING_MINUTE_RETENTION_DAYS
    hour_days = settings.MONITORING_HOUR_RETENTION_DAYS
    return {
        Resolution.RAW: now - timedelta(hours=raw_hours),
        Resolution.MINUTE: now - timedelta(days=minute_days),
        Resolution.HOUR: now - timedelta(days=hour_days),
    }


def prune(now: datetime | None = None) -> int:
    """Delete rows past their tier's retention; returns how many went."""
    deleted = 0
    for step, before in retention_limits(now or timezone.now()).items():
        for model, _, _ in SERIES:
            deleted += model.objects.filter(step=step, time__lt=before).delete()[0]
    return deleted


def run_retention() -> str:
    """The scheduled cleanup: average, then prune; the outcome lands on its Activity row.

    Pruning only runs after averaging succeeded, so no raw data is lost un-averaged.
    """
    try:
        with transaction.atomic():
            created = downsample()
            deleted = prune()
    except Exception as exc:
        record_failure(RETENTION_ACTIVITY, exc)
        raise
    summary = f"{created} averages added, {deleted} old rows deleted"
    record_success(RETENTION_ACTIVITY, summary)
    return summary
