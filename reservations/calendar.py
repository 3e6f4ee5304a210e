"""The week calendar's columns and the timeline's rows: the GPUs shown. Their bookings and
shading come from the API (/api/reservations/ and /api/access/), read by the pages' scripts.
"""

from django.db.models import F

from monitoring.models import Device

from .models import CalendarChoice


def device_label(device: Device) -> str:
    return str(device)  # node-1:0, node-1:0.2 (1g.10gb) for a MIG slice


def chosen_devices(user, requested: list[int] | None = None) -> list[Device]:
    """GPUs to show: those requested, else the user's remembered choice, else the first
    host's (a week of every GPU of a lab is hundreds of columns nobody can read)."""
    devices = Device.objects.filter(status=Device.Status.PRESENT).select_related("host")
    if requested is None:
        choice = CalendarChoice.objects.filter(user_id=user.pk).first()
        requested = choice.devices if choice else []
    if requested:
        devices = devices.filter(pk__in=requested)
    devices = list(devices.order_by("host__name", "index", F("mig_index").asc(nulls_first=True)))
    if not requested and devices:
        devices = [d for d in devices if d.host_id == devices[0].host_id]
    return devices


def resources(devices: list[Device]) -> list[dict]:
    """Column heads: the full label, and the GPU's number (0, or 0.2 for a MIG slice) to show
    where columns are narrow."""
    return [
        {"id": str(d.pk), "title": device_label(d), "extendedProps": {"index": d.number}}
        for d in devices
    ]


def timeline_rows(requested: list[int] | None = None) -> list[dict]:
    """The timeline's rows: every present GPU (or those requested), by host then index (a
    GPU's MIG slices after it, named by number: 0.2), with what its filters read (host,
    model). The page groups them by host."""
    devices = Device.objects.filter(status=Device.Status.PRESENT).select_related("host")
    if requested:
        devices = devices.filter(pk__in=requested)
    return [
        {"id": str(d.pk), "host": d.host.name, "index": d.number, "model": d.name}
        for d in devices.order_by("host__name", "index", F("mig_index").asc(nulls_first=True))
    ]
