"""Prometheus exposition of the latest probes, read from the database (never from hosts).

One scrape costs two queries whatever the number of hosts. GPU gauges are labelled by
host, GPU index, UUID and model; memory is exported in bytes, as Prometheus prefers.
"""

import hmac

from django.conf import settings
from django.http import HttpResponse, HttpResponseForbidden
from django.utils.module_loading import import_string
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from .models import Device, Host

MIB = 1024 * 1024
GPU_LABELS = ["host", "gpu", "uuid", "model"]
# (metric name, help, snapshot field, scale)
GPU_GAUGES = [
    ("hive_gpu_utilization_percent", "GPU utilisation.", "utilization_gpu", 1),
    ("hive_gpu_memory_utilization_percent", "Memory controller busy.", "utilization_memory", 1),
    ("hive_gpu_memory_used_bytes", "GPU memory in use.", "memory_used_mib", MIB),
    ("hive_gpu_memory_total_bytes", "GPU memory installed.", "memory_total_mib", MIB),
    ("hive_gpu_temperature_celsius", "GPU temperature.", "temperature_c", 1),
    ("hive_gpu_power_watts", "GPU power draw.", "power_w", 1),
]
# The same readings under the DCGM exporter's names and labels, so dashboards made for it
# work unchanged (FB_USED is MiB and POWER_USAGE W, as DCGM exports them).
DCGM_LABELS = ["gpu", "UUID", "device", "modelName", "Hostname"]
DCGM_GAUGES = [
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "utilization_gpu"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "utilization_memory"),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "memory_used_mib"),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temperature_c"),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w"),
]
HOST_GAUGES = [
    ("hive_host_cpu_utilization_percent", "CPU busy.", "utilization", 1),
    ("hive_host_memory_used_bytes", "RAM in use.", "memory_used_mib", MIB),
    ("hive_host_memory_total_bytes", "RAM installed.", "memory_total_mib", MIB),
]


class SnapshotCollector:
    """Builds every gauge from the hosts' stored snapshots at scrape time."""

    def collect(self):
        hosts = list(Host.objects.filter(enabled=True))
        yield from self.host_health(hosts)
        yield from self.host_gauges(hosts)
        yield from self.disk_gauges(hosts)
        yield from self.gpu_gauges(hosts)
        yield self.gpu_present()

    def host_health(self, hosts):
        up = GaugeMetricFamily(
            "hive_host_up", "1 if the last probe reached the host.", labels=["host"]
        )
        took = GaugeMetricFamily(
            "hive_host_probe_duration_seconds", "How long the last probe took.", labels=["host"]
        )
        seen = GaugeMetricFamily(
            "hive_host_last_seen_timestamp_seconds", "Last successful probe.", labels=["host"]
        )
        for host in hosts:
            up.add_metric([host.name], 1 if host.status == Host.Status.UP else 0)
            if host.last_probe_seconds is not None:
                took.add_metric([host.name], host.last_probe_seconds)
            if host.last_seen is not None:
                seen.add_metric([host.name], host.last_seen.timestamp())
        return [up, took, seen]

    def host_gauges(self, hosts):
        for name, help_text, field, scale in HOST_GAUGES:
            gauge = GaugeMetricFamily(name, help_text, labels=["host"])
            for host in hosts:
                value = ((host.last_snapshot or {}).get("cpu") or {}).get(field)
                if host.status == Host.Status.UP and value is not None:
                    gauge.add_metric([host.name], value * scale)
            yield gauge

    def disk_gauges(self, hosts):
        used = GaugeMetricFamily(
            "hive_host_disk_used_bytes", "Disk space in use.", labels=["host", "path"]
        )
        total = GaugeMetricFamily(
            "hive_host_disk_total_bytes", "Disk space in all.", labels=["host", "path"]
        )
        for host in (h for h in hosts if h.status == Host.Status.UP):
            for disk in (host.last_snapshot or {}).get("disks") or []:
                used.add_metric([host.name, disk["path"]], disk["used_mib"] * MIB)
                total.add_metric([host.name, disk["path"]], disk["total_mib"] * MIB)
        return [used, total]

    def gpu_gauges(self, hosts):
        live = [(h, g) for h in hosts if h.status == Host.Status.UP for g in _gpus(h)]
        for name, help_text, field, scale in GPU_GAUGES:
            gauge = GaugeMetricFamily(name, help_text, labels=GPU_LABELS)
            for host, gpu in live:
                if gpu.get(field) is not None:
                    gauge.add_metric(_gpu_labels(host.name, gpu), gpu[field] * scale)
            yield gauge
        for name, help_text, field in DCGM_GAUGES:
            gauge = GaugeMetricFamily(name, help_text, labels=DCGM_LABELS)
            for host, gpu in live:
                if gpu.get(field) is not None:
                    gauge.add_metric(_dcgm_labels(host.name, gpu), gpu[field])
            yield gauge
        yield _process_counts(live, [h for h in hosts if h.status == Host.Status.UP])

    def gpu_present(self):
        gauge = GaugeMetricFamily(
            "hive_gpu_present", "0 once a known GPU stopped showing up (lost).", labels=GPU_LABELS
        )
        for device in Device.objects.select_related("host").filter(host__enabled=True):
            labels = [device.host.name, str(device.index), device.uuid, device.name]
            gauge.add_metric(labels, 1 if device.status == Device.Status.PRESENT else 0)
        return gauge


def _gpus(host: Host) -> list[dict]:
    return (host.last_snapshot or {}).get("gpus") or []


def _gpu_labels(host_name: str, gpu: dict) -> list[str]:
    return [host_name, str(gpu.get("index")), gpu.get("uuid", ""), gpu.get("name", "")]


def _dcgm_labels(host_name: str, gpu: dict) -> list[str]:
    index = str(gpu.get("index"))
    return [index, gpu.get("uuid", ""), f"nvidia{index}", gpu.get("name", ""), host_name]


def _process_counts(live, hosts) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily("hive_gpu_processes", "Processes on the GPU.", labels=GPU_LABELS)
    counts: dict[tuple, int] = {}
    for host in hosts:
        for process in (host.last_snapshot or {}).get("processes") or []:
            key = (host.name, process.get("gpu_uuid"))
            counts[key] = counts.get(key, 0) + 1
    for host, gpu in live:
        gauge.add_metric(_gpu_labels(host.name, gpu), counts.get((host.name, gpu.get("uuid")), 0))
    return gauge


def token_matches(request) -> bool:
    """Constant-time check of ``Authorization: Bearer <METRICS_TOKEN>``."""
    expected = f"Bearer {settings.METRICS_TOKEN}".encode()
    given = request.headers.get("Authorization", "").encode()
    return hmac.compare_digest(given, expected)


@require_GET
def metrics(request):
    """The Prometheus scrape target; off (403) unless METRICS_TOKEN is set."""
    if not settings.METRICS_TOKEN:
        return HttpResponseForbidden("/metrics is off: set METRICS_TOKEN to enable it.\n")
    if not token_matches(request):
        return HttpResponseForbidden("Send the header 'Authorization: Bearer <METRICS_TOKEN>'.\n")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector())
    # Higher apps add theirs through a setting (monitoring imports none of them).
    for path in settings.METRICS_EXTRA_COLLECTORS:
        registry.register(import_string(path)())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
