"""What live dashboards receive: every enabled host's latest probe, read from the database.

The web and worker processes are separate, and the embedded profile has no shared channel
layer, so dashboards poll a cheap marker (one aggregate query) every MONITORING_INTERVAL
and fetch the snapshot only when it changed. With Redis, the loop's group message makes
the same check run at once instead of waiting for the next poll.
"""

from collections.abc import Callable

from django.db.models import Count, Max

from .containers import owner_text
from .models import Device, Host
from .visibility import visible_processes


def freshness_marker() -> tuple:
    """Changes whenever a probe is recorded or a host is added, removed or toggled."""
    enabled = Host.objects.filter(enabled=True)
    marker = enabled.aggregate(probed=Max("last_probe_at"), hosts=Count("id"), top=Max("id"))
    return (marker["probed"], marker["hosts"], marker["top"])


# What a page may subscribe to (the socket's ?view=): "board", the board's few figures per
# GPU; "host", one host's whole entry (?host=<id>); "full", every host's whole entry.
VIEWS = ("full", "board", "host")


# Who runs on a GPU against its booking, as a layer above this one knows it: protection
# registers its open violations (protection.apps). Each source: () -> {device id: names}.
_intruder_sources: list[Callable[[], dict[int, str]]] = []


def register_intruders(source: Callable[[], dict[int, str]]) -> None:
    if source not in _intruder_sources:
        _intruder_sources.append(source)


def intruders() -> dict[int, str]:
    """Device id -> the intruders there, in words, from every registered source."""
    found: dict[int, list[str]] = {}
    for source in _intruder_sources:
        for device, names in source().items():
            found.setdefault(device, []).append(names)
    return {device: ", ".join(names) for device, names in found.items()}


def live_payload(visibility, view: str = "full", host_id: int | None = None) -> dict:
    """The message a dashboard gets: one entry per host, GPUs with their device ids, other
    users' command lines hidden as ``visibility`` (monitoring.visibility) decides. ``view``
    sizes it to the page: the board gets board_entry's compact rows, a host page its host."""
    hosts = Host.objects.filter(enabled=True).prefetch_related("devices")
    if view == "host":
        hosts = hosts.filter(pk=host_id)
    if view == "board":
        found = intruders()
        entries = [board_entry(host, visibility, found) for host in hosts]
    else:
        entries = [host_payload(host, visibility) for host in hosts]
    return {"type": "snapshot", "hosts": entries}


# The board's row per GPU, in this order (static/js/board.js reads it by position; the total
# memory it rendered does not change): 800 GPUs as named objects were 280 KB, as rows 27 KB.
BOARD_GPU_FIELDS = (
    "device_id",
    "utilization_gpu",
    "memory_used_mib",
    "temperature_c",
    "power_w",
)


def board_entry(host: Host, visibility, found: dict[int, str] | None = None) -> dict:
    """What the board shows of a host live: its state, each GPU's figures, who runs on each
    GPU or MIG slice and who of them intrudes (device id -> "alice, bob (container x)", from
    ``found``: ``intruders()``); no command lines, disks or CPU."""
    snapshot = host.last_snapshot or {}
    devices = {d.uuid: d.pk for d in host.devices.all()}
    gpus, users = [], {}
    # A MIG slice is a row too (memory alone: nvidia-smi gives no more of it).
    for gpu in [*(snapshot.get("gpus") or []), *(snapshot.get("slices") or [])]:
        power = gpu.get("power_w")
        row = {
            **gpu,
            "device_id": devices.get(gpu.get("uuid")),
            "power_w": None if power is None else round(power),
        }
        gpus.append([row.get(name) for name in BOARD_GPU_FIELDS])
    for process in snapshot.get("processes") or []:
        device = devices.get(process.get("gpu_uuid"))
        if device is not None:
            users.setdefault(str(device), set()).add(owner_text(process))
    up = host.status == Host.Status.UP
    return {
        "id": host.pk,
        "name": host.name,
        "status": host.status,
        "up": up,
        "gpus": gpus if up else [],
        "users": {device: ", ".join(sorted(names)) for device, names in users.items()}
        if up
        else {},
        "intruders": {str(pk): found[pk] for pk in devices.values() if pk in (found or {})},
    }


# Sent with every changed host, so a client can tell what it is and whether it is up.
ALWAYS = ("id", "name", "status", "up")


def changes(payload: dict, sent: dict[int, dict]) -> dict:
    """The message after the first on one socket: for each host, only the keys whose value
    differs from what this socket last got (``sent``, id -> entry), plus ALWAYS; unchanged
    hosts are left out, and hosts gone are listed in ``removed``. Clients merge it into what
    they have (static/js/live.js), so a cycle where most GPUs idle costs a few bytes each."""
    hosts = []
    for host in payload["hosts"]:
        before = sent.get(host["id"])
        if before == host:
            continue
        if before is None:
            hosts.append(host)
            continue
        changed = {key: value for key, value in host.items() if before.get(key) != value}
        hosts.append({**{key: host[key] for key in ALWAYS}, **changed})
    present = {host["id"] for host in payload["hosts"]}
    return {"type": "changes", "hosts": hosts, "removed": sorted(set(sent) - present)}


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
        "slices": [gpu_payload(piece, devices) for piece in snapshot.get("slices") or []],
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
