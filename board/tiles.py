"""The GPU board's rows, built from the latest stored probe of every enabled host (pages
never reach hosts) and the booking states: one dict per GPU, one per host."""

from collections import defaultdict
from dataclasses import dataclass, field

from django.urls import reverse

from monitoring.containers import owner_text
from monitoring.models import Device, Host
from protection.models import intruders

from .states import FREE, booking_states, state_text
from .templatetags.board_format import short_gib


@dataclass
class HostRow:
    host: Host
    up: bool
    url: str = ""
    gpus: list[dict] = field(default_factory=list)

    @property
    def free(self) -> int:
        return sum(g["free"] for g in self.gpus)


def short_model(name: str) -> str:
    """'NVIDIA A100-SXM4-40GB' -> 'A100-SXM4-40GB': the vendor is the same on every tile."""
    return (name or "unknown model").removeprefix("NVIDIA ").removeprefix("GeForce ")


def percent(part, whole) -> int | None:
    if part is None or not whole:
        return None
    return max(0, min(100, round(100 * part / whole)))


def users_by_gpu(processes: list[dict]) -> dict[str, list[str]]:
    users = defaultdict(set)
    for process in processes:
        users[process.get("gpu_uuid")].add(owner_text(process))
    return {uuid: sorted(names) for uuid, names in users.items()}


def board_rows(user) -> list[HostRow]:
    states = booking_states(user)
    found = intruders()
    hosts = Host.objects.filter(enabled=True).prefetch_related("devices").order_by("name")
    return [host_row(host, states, user, found) for host in hosts]


def host_row(host: Host, states: dict, user, found: dict[int, str] | None = None) -> HostRow:
    up = host.status == Host.Status.UP
    snapshot = host.last_snapshot or {}
    seen = [*(snapshot.get("gpus") or []), *(snapshot.get("slices") or [])]
    samples = {g.get("uuid"): g for g in seen} if up else {}
    users = users_by_gpu(snapshot.get("processes") or []) if up else {}
    row = HostRow(host, up, reverse("host-detail", args=[host.name]))
    for device in host.devices.all():
        booking = states.get(device.pk, FREE)
        sample = samples.get(device.uuid)
        tile = gpu_tile(device, sample, users.get(device.uuid, []), booking, up, user)
        tile["intruder"] = (found or {}).get(device.pk, "")
        row.gpus.append(tile)
    return row


def gpu_tile(device: Device, sample, users, booking, up: bool, user) -> dict:
    sample = sample or {}
    total = sample.get("memory_total_mib") or device.memory_total_mib
    lost = device.status == Device.Status.LOST
    return {
        "id": device.pk,
        "index": device.index,
        # A MIG slice is shown after its GPU, named as nvidia-smi's MIG device is.
        "slice": device.is_slice,
        "name": device.number,
        "model": tile_model(device),
        "util_width": percent(sample.get("utilization_gpu"), 100) or 0,
        "mem_width": percent(sample.get("memory_used_mib"), total) or 0,
        "memory_total": total,
        "figures": figures(sample, total, device.is_slice) if up and not lost else "",
        "users": ", ".join(users) or "no processes",
        "booking": booking,
        "state_text": tile_text(booking, users, up, lost),
        # What it reads once its booking or job is over (the job form's picker shows it then).
        "unbooked_text": tile_text(FREE, users, up, lost),
        "colour": tile_colour(booking, users, up and not lost, booking.owner_id == user.pk),
        "mine": booking.owner_id == user.pk,
        "lost": lost,
        "last_seen": device.last_seen,
        "seen": up and not lost,
        # Free now: nobody's booking or job, and nothing running on it either.
        "free": up and not lost and booking.state == "free" and not users,
    }


def tile_model(device: Device) -> str:
    """'A100-SXM4-40GB', 'H100 80GB HBM3 · MIG' for a GPU in MIG mode, 'MIG 1g.10gb' for
    one of its slices (the tile after the GPU's)."""
    if device.is_slice:
        return f"MIG {device.mig_profile}"
    return short_model(device.name) + (" · MIG" if device.mig_enabled else "")


def figures(sample: dict, total, mig_slice: bool = False) -> str:
    """ "74 % · 35/48 GiB · 72 °C · 227 W", as board.js writes it on live updates; a MIG
    slice's memory alone (nvidia-smi gives no more of it). Built here rather than in the
    template: 800 tiles of template filters cost a third of a second."""

    def dash(value):
        return "–" if value is None else value

    if mig_slice:
        return f"{short_gib(sample.get('memory_used_mib'))}/{short_gib(total)} GiB"
    power = sample.get("power_w")
    return (
        f"{dash(sample.get('utilization_gpu'))} % · {short_gib(sample.get('memory_used_mib'))}/"
        f"{short_gib(total)} GiB · {dash(sample.get('temperature_c'))} °C · "
        f"{'–' if power is None else round(power)} W"
    )


def tile_colour(booking, users, seen: bool, mine: bool) -> str:
    """The tile's class (board.css; board.js's stateClass decides the same way live)."""
    if not seen:
        return "gt-down"
    if mine:
        return "gt-mine"
    if booking.state in ("free", "closed"):
        return "gt-busy" if users else f"gt-{booking.state}"
    return "gt-job" if booking.state in ("job", "queue") else "gt-reserved"


def tile_text(booking, users, up: bool, lost: bool) -> str:
    if lost:
        return "GPU lost"
    if not up:
        return "host down"
    if booking.state in ("free", "closed") and users:
        return "in use, not booked"
    return state_text(booking)


def summary(rows: list[HostRow]) -> dict:
    gpus = [g for row in rows for g in row.gpus]
    return {
        "gpus": len(gpus),
        "free": sum(g["free"] for g in gpus),
        "reserved": sum(g["booking"].state in ("reserved", "mine", "pending") for g in gpus),
        "running": sum(g["booking"].state in ("job", "queue") for g in gpus),
        "lost": sum(g["lost"] for g in gpus),
        "intruded": sum(bool(g["intruder"]) for g in gpus),
        "hosts": len(rows),
        "hosts_down": sum(not row.up for row in rows),
    }
