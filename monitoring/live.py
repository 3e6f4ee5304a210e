"""What live dashboards receive: every enabled host's latest probe, read from the database.

The web and worker processes are separate, and the embedded profile has no shared channel
layer, so dashboards poll a cheap marker (one aggregate query) every MONITORING_INTERVAL
and fetch the snapshot only when it changed. With Redis, the loop's group message makes
the same check run at once instead of waiting for the next poll.
"""

from django.db.models import Count, Max

from .models import Device, Host
from .visibility import visible_processes


def freshness_marker() -> tuple:
    """Changes whenever a probe is recorded or a host is added, removed or toggled."""
    enabled = Host.objects.filter(enabled=True)
    marker = enabled.aggregate(probed=Max("last_probe_at"), hosts=Count("id"), top=Max("id"))
    return (marker["probed"], marker["hosts"], marker["top"])


def live_payload(visibility) -> dict:
    """The message a dashboard gets: one entry per host, GPUs with their device ids, other
    users' command lines hidden as ``visibility`` (monitoring.visibility) decides."""
    hosts = Host.objects.filter(enabled=True).prefetch_related("devices")
    return {"type": "snapshot", "hosts": [host_payload(host, visibility) for host in hosts]}


def host_payload(host: Host, visibility) -> dict:
    snapshot = host.last_snapshot or {}
    devices = {d.uuid: d for d in host.devices.all()}
    return {
        "id": host.pk,
        "name": host.name,
        "status": host.status,
        "status_display": host.get_status_display(),
        "up": host.status == Host.Status.UP,
        "last_seen": host.last_seen.isoformat() if host.last_seen else None,
        "last_probe_at": host.last_probe_at.isoformat() if host.last_probe_at else None,
        "last_error": host.last_error,
        "cpu": snapshot.get("cpu") or {},
        "disks": snapshot.get("disks") or [],
        "gpus": [gpu_payload(gpu, devices) for gpu in snapshot.get("gpus") or []],
        "processes": visible_processes(visibility, host, snapshot.get("processes")),
        "lost_gpus": [
            {
                "id": d.pk,
                "index": d.index,
                "uuid": d.uuid,
                "name": d.name,
                "last_seen": d.last_seen.isoformat(),
            }
            for d in devices.values()
            if d.status == Device.Status.LOST
        ],
    }


def gpu_payload(gpu: dict, devices: dict) -> dict:
    device = devices.get(gpu.get("uuid"))
    return {**gpu, "device_id": device.pk if device else None}
