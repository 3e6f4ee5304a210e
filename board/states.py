"""What each GPU is doing for people right now: free, reserved (by whom, until when), taken
by a running job or a queue run, or free but not the viewer's to use (no grant lets them
start on it now: "free" means free for the viewer). A few queries whatever the number of
GPUs; who holds each is allocation.holders' answer, and the grants are the start rule's own
(accesscontrol.coverage)."""

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from accesscontrol.coverage import ONE_MINUTE, coverage_map, covers_next_minute
from allocation.holders import QUEUE_RUN, RESERVATION, TASK, Holding, holders
from core.templatetags.hive_time import absolute
from monitoring.models import Device


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
    held = holders(now)  # None: who holds each GPU at present
    states = dict.fromkeys(closed_to(user, now or timezone.now()), CLOSED)
    queue_jobs = {h.job_id for h in held if h.kind == QUEUE_RUN}
    for holding in (h for h in held if h.kind == RESERVATION):
        states[holding.device_id] = reservation_state(user, holding)
    for holding in (h for h in held if h.kind == TASK):
        booked = states.get(holding.device_id)
        states[holding.device_id] = task_state(user, booked, holding, holding.job_id in queue_jobs)
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


def reservation_state(user, booking: Holding) -> Booking:
    owner_id, end = booking.owner_id, booking.end
    if owner_id == user.pk:
        return Booking("mine", "your reservation", end, owner_id)
    if not booking.confirmed:
        return Booking("pending", f"{booking.owner} (awaiting approval)", end, owner_id)
    return Booking("reserved", f"reserved by {booking.owner}", end, owner_id)


def task_state(user, booked: Booking | None, task: Holding, queue_run: bool) -> Booking:
    """A running task says more than the booking it runs in; the booking's end stays."""
    whose = "your" if task.owner_id == user.pk else f"{task.owner}'s"
    job_id = task.job_id
    kind, text = ("queue", f"{whose} queue run") if queue_run else ("job", f"{whose} job {job_id}")
    return Booking(kind, text, booked.until if booked else None, task.owner_id, job_id)


def state_text(booking: Booking) -> str:
    """ "reserved by ada until Thu 26 Nov 14:00": the one sentence a tile shows."""
    return f"{booking.text} until {absolute(booking.until)}" if booking.until else booking.text
