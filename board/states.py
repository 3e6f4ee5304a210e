"""What each GPU is doing for people right now: free, reserved (by whom, until when), taken
by a running job or a queue run, or free but not the viewer's to use (no grant lets them
start on it now: "free" means free for the viewer). A few queries whatever the number of
GPUs; the grants are the start rule's own (accesscontrol.coverage)."""

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from accesscontrol.coverage import ONE_MINUTE, coverage_map, covers_next_minute
from jobs.models import Task
from monitoring.models import Device
from reservations.models import Reservation, ReservedDevice

from .templatetags.hive_time import absolute


@dataclass
class Booking:
    # free | closed (free, not the viewer's to use) | mine | reserved | pending | job | queue
    # | partial (a GPU some of whose MIG slices are taken)
    state: str
    text: str
    until: datetime | None = None
    owner_id: int | None = None
    job_id: int | None = None


FREE = Booking("free", "free")
CLOSED = Booking("closed", "free, not yours to use")


def booking_states(user, now: datetime | None = None) -> dict[int, Booking]:
    """Device id -> its booking state for ``user``; GPUs not listed are free."""
    now = now or timezone.now()
    states = dict.fromkeys(closed_to(user, now), CLOSED)
    states.update({device: reservation_state(user, *row) for device, *row in current_slots(now)})
    for device, *row in running_tasks():
        states[device] = task_state(user, states.get(device), *row)
    share_with_slices(states)
    return states


SLICES_TAKEN = Booking("partial", "MIG slices in use")


def share_with_slices(states: dict[int, Booking]) -> None:
    """A GPU and its MIG slices share hardware: a slice shows its GPU's booking or job when
    it has none of its own, and a GPU with a slice taken is not free (the start rule's
    sharing, as people see it)."""
    taken = {pk for pk, state in states.items() if state is not CLOSED}
    pairs = Device.objects.filter(parent__isnull=False, status=Device.Status.PRESENT)
    for piece, gpu in pairs.values_list("pk", "parent_id"):
        if gpu in taken and piece not in taken:
            states[piece] = states[gpu]
        elif piece in taken and gpu not in taken:
            states[gpu] = SLICES_TAKEN


def closed_to(user, now: datetime) -> list[int]:
    """Ids of present GPUs ``user`` may not start on now (no grant covers the next minute)."""
    devices = list(Device.objects.filter(status=Device.Status.PRESENT).select_related("host"))
    covered = coverage_map(user, now, now + ONE_MINUTE, devices)
    return [d.pk for d, spans in covered.items() if not covers_next_minute(spans, now)]


def current_slots(now: datetime):
    return ReservedDevice.objects.filter(holds=True, start__lte=now, end__gt=now).values_list(
        "device_id",
        "reservation__owner_id",
        "reservation__owner__username",
        "reservation__status",
        "end",
    )


def reservation_state(user, owner_id, owner_name, status, end) -> Booking:
    if owner_id == user.pk:
        return Booking("mine", "your reservation", end, owner_id)
    if status == Reservation.Status.PENDING:
        return Booking("pending", f"{owner_name} (awaiting approval)", end, owner_id)
    return Booking("reserved", f"reserved by {owner_name}", end, owner_id)


def running_tasks():
    return Task.devices.through.objects.filter(task__status__in=Task.ACTIVE).values_list(
        "device_id",
        "task__job_id",
        "task__job__owner_id",
        "task__job__owner__username",
        "task__job__queue_run__id",
    )


def task_state(user, booked: Booking | None, job_id, owner_id, owner_name, queue_run) -> Booking:
    """A running task says more than the booking it runs in; the booking's end stays."""
    whose = "your" if owner_id == user.pk else f"{owner_name}'s"
    kind, text = ("queue", f"{whose} queue run") if queue_run else ("job", f"{whose} job {job_id}")
    return Booking(kind, text, booked.until if booked else None, owner_id, job_id)


def state_text(booking: Booking) -> str:
    """ "reserved by ada until Thu 26 Nov 14:00": the one sentence a tile shows."""
    return f"{booking.text} until {absolute(booking.until)}" if booking.until else booking.text
