"""The week calendar's columns: the GPUs shown. Its bookings and shading come from the API
(/api/reservations/ and /api/access/), read by the page's script.
"""

from monitoring.models import Device

from .models import CalendarChoice


def device_label(device: Device) -> str:
    return f"{device.host.name}:{device.index}"


def chosen_devices(user, requested: list[int] | None = None) -> list[Device]:
    """GPUs to show: those requested, else the user's remembered choice, else the first
    host's (a week of every GPU of a lab is hundreds of columns nobody can read)."""
    devices = Device.objects.filter(status=Device.Status.PRESENT).select_related("host")
    if requested is None:
        choice = CalendarChoice.objects.filter(user_id=user.pk).first()
        requested = choice.devices if choice else []
    if requested:
        devices = devices.filter(pk__in=requested)
    devices = list(devices.order_by("host__name", "index"))
    if not requested and devices:
        devices = [d for d in devices if d.host_id == devices[0].host_id]
    return devices


def resources(devices: list[Device]) -> list[dict]:
    """Column heads: the full label, and the GPU's index to show where columns are narrow."""
    return [
        {"id": str(d.pk), "title": device_label(d), "extendedProps": {"index": d.index}}
        for d in devices
    ]
