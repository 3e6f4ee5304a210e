"""Who holds which GPUs over a range of time: the one question every app asks the same way.

Three kinds of holder hold a GPU:

- a **booking** (reservations): from its start to its end, pending approval or confirmed;
- a **task** of a job (jobs): from its start until it ends, while it is active;
- a **queue run's claim** (queueing): from the round that placed the run until the run ends.

Bookings are below this layer and are read here. Tasks and claims belong to the apps above
it, which register the source of their holdings when they are ready (as their permission
rules are registered with ``restrict``), so this layer reads them without importing them.
``holders`` asks every source, so the start rule, protection, fair use and the board cannot
disagree about who holds a GPU.

A GPU and its MIG slices share hardware: a holding of a GPU holds each of its slices, and a
holding of a slice holds its GPU (two slices of one GPU do not). Asked about ``devices``,
``holders`` answers with the holdings of the devices sharing their hardware too, each given
as a holding of the device asked about, ``shared_from`` naming the device really held.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import QuerySet
from django.utils import timezone

from monitoring.models import Device, sharing
from reservations.models import Reservation, ReservedDevice

RESERVATION, TASK, QUEUE_RUN = "reservation", "task", "queue_run"
KINDS = frozenset({RESERVATION, TASK, QUEUE_RUN})


@dataclass(frozen=True)
class Holding:
    """One holder of one GPU over [start, end); ``end`` None: until it ends."""

    kind: str  # RESERVATION, TASK or QUEUE_RUN
    device_id: int
    holder_id: int  # the reservation, task or queue run
    owner_id: int
    owner: str  # the owner's user name, for sentences
    start: datetime | None  # None: not recorded (a task claimed before starting)
    end: datetime | None
    name: str = ""  # the booking's title, the job's or the queued job's name
    job_id: int | None = None  # the job of a task or of a queue run
    confirmed: bool = True  # False for a booking awaiting approval
    run_as: str = ""  # a task's UNIX account
    preemptible: bool = False  # a running opportunistic queue run
    shared_from: int | None = None  # the device held, where it shares device_id's hardware

    def overlaps(self, start: datetime, end: datetime | None = None) -> bool:
        """Whether it holds the GPU at some time in [start, end) (at ``start`` if no end)."""
        if end is None:
            return (self.start is None or self.start <= start) and (
                self.end is None or self.end > start
            )
        return (self.start is None or self.start < end) and (self.end is None or self.end > start)


# A source answers for its kind: the holdings of these devices over [start, end). ``start``
# None asks who holds them now (only what holds them at present, no history); ``devices`` is
# a list of device ids, a query of them, or None for every device.
Source = Callable[[object, datetime | None, datetime | None], Iterable[Holding]]
_sources: dict[str, Source] = {}


def register(kind: str, source: Source) -> None:
    """Called by the app that owns ``kind`` when it is ready."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of holder {kind!r}")
    _sources[kind] = source


def holders(
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    devices: Iterable | None = None,
    hosts: Iterable | None = None,
    kinds: Iterable[str] = KINDS,
) -> list[Holding]:
    """Every holding of the GPUs (``devices``, those of ``hosts``, or all) over [start, end).

    ``start`` None means now: who holds them at present (ended tasks are not read); a start
    in the past also finds the tasks that ended since. ``end`` None asks about the instant
    ``start`` (or now). ``kinds`` narrows the answer to some kinds of holder. Asked about
    ``devices``, a holding of a device sharing one's hardware (its GPU, its MIG slices) is
    answered as that one's holding too.
    """
    sharers = None if devices is None else _sharers(list(devices))
    ids = _device_ids(None if sharers is None else list(sharers), hosts)
    found: list[Holding] = []
    for kind in sorted(set(kinds)):
        source = _reservations if kind == RESERVATION else _sources.get(kind)
        if source is None:
            raise LookupError(f"no source of {kind} holdings is registered (is its app ready?)")
        found += source(ids, start, end)
    if sharers is None:
        return found
    return [
        holding if pk == held else replace(holding, device_id=pk, shared_from=held)
        for holding in found
        for held in [holding.device_id]
        for pk in sharers.get(held, ())
    ]


def _sharers(devices: list[Device | int]) -> dict[int, list[int]]:
    """Device id -> the ids of the devices asked about that share its hardware (itself,
    where asked). Asks the database only where a device may be a MIG slice or a GPU in MIG
    mode: given by id, or a Device that is one."""
    ids = [d if isinstance(d, int) else d.pk for d in devices]
    if all(isinstance(d, Device) and not (d.parent_id or d.mig_enabled) for d in devices):
        return {pk: [pk] for pk in ids}
    sharers: dict[int, list[int]] = {}
    for pk, shared in sharing(ids).items():
        for device in shared:
            sharers.setdefault(device.pk, []).append(pk)
    return sharers


def _device_ids(
    devices: Iterable[Device | int] | None, hosts: Iterable[int] | None
) -> Iterable[int] | QuerySet[Device, int] | None:
    if devices is not None:
        return [d if isinstance(d, int) else d.pk for d in devices]
    if hosts is not None:
        return Device.objects.filter(host__in=list(hosts)).values_list("pk", flat=True)
    return None


def _reservations(
    devices: Iterable[int] | QuerySet[Device, int] | None,
    start: datetime | None,
    end: datetime | None,
) -> list[Holding]:
    slots = ReservedDevice.objects.holding(start or timezone.now(), end)
    if devices is not None:
        slots = slots.filter(device_id__in=devices)
    rows = slots.order_by("start", "pk").values_list(
        "device_id",
        "reservation_id",
        "reservation__owner_id",
        "reservation__owner__username",
        "start",
        "end",
        "reservation__title",
        "reservation__status",
    )
    return [
        Holding(
            RESERVATION,
            device_id,
            reservation_id,
            owner_id,
            owner,
            slot_start,
            slot_end,
            name=title,
            confirmed=status == Reservation.Status.CONFIRMED,
        )
        for device_id, reservation_id, owner_id, owner, slot_start, slot_end, title, status in rows
    ]
