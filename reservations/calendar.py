"""The week calendar's data: GPUs as resources, bookings as boxes, permitted time shaded.

Built from a fixed number of queries whatever the number of bookings shown: the devices,
the slots (with their reservation and owner), and the access-control coverage.
"""

from datetime import datetime
from zoneinfo import ZoneInfo

from django.db.models import F

from accesscontrol.coverage import coverage_map
from monitoring.models import Device

from .models import CalendarChoice, ReservedDevice
from .zones import wall_text


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


SLOT_FIELDS = (
    "reservation_id",
    "device_id",
    "start",
    "end",
    "reservation__title",
    "reservation__status",
    "reservation__owner_id",
    "reservation__owner__username",
)


def slots_between(devices, start: datetime, end: datetime):
    """Slots of the shown GPUs overlapping [start, end), cancelled ones included, as tuples
    (model instances cost three objects per row, the larger part of the feed's time)."""
    return (
        ReservedDevice.objects.overlapping(start, end)
        .filter(device__in=devices)
        .order_by("start")
        .values_list(*SLOT_FIELDS)
    )


def booking_events(user, devices, start, end, zone: ZoneInfo) -> list[dict]:
    """One box per reservation, spread over the columns of its GPUs that are shown."""
    events: dict[int, dict] = {}
    for row in slots_between(devices, start, end):
        event = events.get(row[0])
        if event is None:
            event = events[row[0]] = _event(user, *row[:1], *row[2:], zone=zone)
        event["resourceIds"].append(str(row[1]))
    return list(events.values())


def _event(user, pk, start, end, title, status, owner_id, owner_name, zone: ZoneInfo) -> dict:
    return {
        "id": str(pk),
        "resourceIds": [],
        "start": wall_text(start, zone),
        "end": wall_text(end, zone),
        "title": f"{owner_name}: {title}",
        "classNames": ["booking", "mine" if owner_id == user.pk else "others", status],
        "extendedProps": {"reservation": pk, "owner": owner_name, "status": status},
    }


def permitted_events(user, devices, start, end, zone: ZoneInfo) -> list[dict]:
    """Background boxes where the user may book (their grants' windows, bans removed)."""
    coverage = coverage_map(user, start, end, devices)
    return [
        {
            "start": wall_text(s, zone),
            "end": wall_text(e, zone),
            "resourceIds": [str(device.pk)],
            "display": "background",
            "classNames": ["permitted"],
        }
        for device, intervals in coverage.items()
        for s, e in intervals
    ]


def calendar_events(user, devices, start, end, zone: ZoneInfo) -> list[dict]:
    if not devices:
        return []
    return permitted_events(user, devices, start, end, zone) + booking_events(
        user, devices, start, end, zone
    )
