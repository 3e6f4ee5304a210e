"""Detection: after each monitoring cycle, find processes on GPUs where they may not run.

Runs as a django-q2 task queued by the ``cycle_finished`` receiver (no polling loop of its
own). It reads each host's latest probe (``Host.last_snapshot``), so it needs no SSH.
Handlers are queued after the detection's transaction commits.

The grace period is for a process that is just ending, and that happens at a boundary:
the previous user's job still finishing when a reservation's slot begins. So:

- a process on a reserved GPU that was not in an earlier checked probe of the slot (it
  appeared while the reservation was running) is an intruder at first sight: it becomes a
  Violation in the very cycle it is first seen;
- a process already there in the slot's first checked probe (with the usual interval,
  first seen within one MONITORING_INTERVAL of the slot's start) gets PROTECTION_GRACE_CYCLES
  more probes: a Sighting counts its consecutive probes, and it is flagged once seen in
  more than that many (forgotten if it ends first);
- the strict level's processes on GPUs without a reservation have no boundary to measure
  from (a reservation that just ended is one), so they are always counted like that.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from accesscontrol.owners import UnixNames, resolved_unix_name, service_user
from allocation.holders import RESERVATION, TASK, holders
from core import lease
from monitoring.models import Device, Host
from reservations.models import Reservation

from . import config
from .handlers import queue_handlers
from .models import CheckedProbe, Sighting, Violation

log = logging.getLogger(__name__)

ACTIVITY = "protection"


@dataclass
class Intrusion:
    """A process seen on a GPU where its owner may not run it (in this probe)."""

    device: Device
    pid: int
    offender_unix: str  # "" when the owner is unknown
    command: str
    reservation: Reservation | None
    slot_start: datetime | None  # when the reservation began holding this GPU
    container: dict | None = None  # {"id", "name", "runtime"}: see monitoring.containers

    def key(self) -> tuple:
        return (self.device.pk, self.pid, self.offender_unix, getattr(self.reservation, "pk", None))


def worth_checking(host_ids: list[int], at) -> bool:
    """Whether a check of these hosts could find or change anything (asked every cycle).

    Without reservations in force there, or anything open or half-counted, the reserved
    level has nothing to do: no task is queued, so idle labs cost one query per cycle.
    """
    level = config.level()
    if level == config.STRICT:
        return True
    pending = Violation.objects.filter(device__host__in=host_ids, ended_at=None).exists()
    if pending or Sighting.objects.filter(device__host__in=host_ids).exists():
        return True
    if level == config.OFF:
        return False
    return any(h.confirmed for h in holders(at, hosts=host_ids, kinds={RESERVATION}))


def check_hosts(host_ids: list[int]) -> str:
    """The task: check each host of one cycle; one host's failure never stops the others."""
    level = config.level()
    opened = continuing = 0
    for host_id in host_ids:
        try:
            new, old = check_host(host_id, level)
        except Exception as exc:
            name = host_name(host_id)
            log.exception("protection: checking %s failed", name)
            lease.record_failure(ACTIVITY, f"checking {name} failed: {exc!r}")
            continue
        opened, continuing = opened + new, continuing + old
    summary = f"{len(host_ids)} hosts checked ({level}): {opened} new, {continuing} continuing"
    lease.record_success(ACTIVITY, summary)
    return summary


def host_name(host_id: int) -> str:
    """The host's name for a failure message (its id if even that cannot be read)."""
    try:
        return Host.objects.values_list("name", flat=True).get(pk=host_id)
    except Exception:  # the failure being recorded may be the database's own
        return f"host {host_id}"


@transaction.atomic
def check_host(host_id: int, level: str) -> tuple[int, int]:
    """Compare one host's latest probe with its reservations. Returns (new, continuing)."""
    # Locking the host row serialises two detections of one host (PostgreSQL; SQLite's
    # IMMEDIATE transactions already do), so a violation is never opened twice.
    host = Host.objects.select_for_update().filter(pk=host_id).first()
    if host is None or not _probe_is_usable(host):
        return 0, 0  # unreachable or nvidia-smi failed: we cannot tell, so change nothing
    seen_at = host.last_probe_at
    intrusions = [] if level == config.OFF else find_intrusions(host, level, seen_at)
    opened, continuing = record(host, intrusions, seen_at, checked_before(host, seen_at))
    queue_handlers(opened, continuing)
    return len(opened), len(continuing)


def _probe_is_usable(host: Host) -> bool:
    snapshot = host.last_snapshot or {}
    return host.status == Host.Status.UP and snapshot.get("reachable") and host.last_probe_at


def guards(host: Host, at) -> dict[int, tuple[Reservation, datetime]]:
    """Device id -> the confirmed reservation holding it at ``at``, and since when it guards
    it: its start, or its booking if it was booked "now" (the start may lie a grace minute
    back): a process already running when it was booked is just ending there, like one
    running at a start."""
    held = [h for h in holders(at, hosts=[host.pk], kinds={RESERVATION}) if h.confirmed]
    bookings = Reservation.objects.select_related("owner").in_bulk({h.holder_id for h in held})
    return {
        h.device_id: (bookings[h.holder_id], max(h.start, bookings[h.holder_id].created))
        for h in held
    }


def task_accounts(host: Host, at) -> dict[int, set[str]]:
    """Device id -> the UNIX accounts of the service's tasks holding it at ``at`` (a job
    started by hand or from the queue): at the strict level, such a task's GPUs are its
    owner's."""
    accounts: dict[int, set[str]] = {}
    for holding in holders(at, hosts=[host.pk], kinds={TASK}):
        accounts.setdefault(holding.device_id, set()).add(holding.run_as)
    return accounts


def find_intrusions(host: Host, level: str, at) -> list[Intrusion]:
    devices = {d.uuid: d for d in host.devices.all()}
    slots = guards(host, at)
    tasks = task_accounts(host, at) if level == config.STRICT else {}
    names, rules = UnixNames(host), config.allow_rules()
    intrusions = []
    for process in host.last_snapshot.get("processes") or []:
        device = devices.get(process.get("gpu_uuid"))
        if device is None or process.get("pid") is None:
            continue  # a GPU we do not know yet, or a PID nvidia-smi would not tell
        unix = resolved_unix_name(process.get("user"))
        command = process.get("command") or ""
        if config.is_allowed(unix, command, rules):
            continue
        # A booking of a GPU guards its MIG slices. A process the driver could not put on
        # a slice stays on the GPU, where a booking of one slice does not reach it.
        reservation, since = slots.get(device.pk) or slots.get(device.parent_id) or (None, None)
        owned = tasks.get(device.pk, set()) | tasks.get(device.parent_id, set())
        if reservation is None and (level != config.STRICT or unix in owned):
            continue
        if reservation and unix is not None and unix == names.of(reservation.owner):
            continue
        intrusions.append(
            Intrusion(
                device,
                process["pid"],
                unix or "",
                command,
                reservation,
                since,
                process.get("container"),
            )
        )
    return intrusions


def checked_before(host: Host, seen_at) -> datetime | None:
    """The probe of this host checked before the one taken at ``seen_at`` (None: none yet),
    and remember ``seen_at`` as checked. Checking one probe twice changes nothing."""
    checked = CheckedProbe.objects.filter(host=host).first()
    if checked is None:
        CheckedProbe.objects.create(host=host, probe_at=seen_at)
        return None
    if checked.probe_at >= seen_at:  # this probe again (two workers, or a retried task)
        return checked.previous_probe_at
    checked.previous_probe_at, checked.probe_at = checked.probe_at, seen_at
    checked.save(update_fields=["previous_probe_at", "probe_at"])
    return checked.previous_probe_at


def record(
    host: Host, intrusions: list[Intrusion], seen_at, previous_probe_at: datetime | None
) -> tuple[list, list]:
    """Update violations and sightings from one probe. Returns (opened, continuing).

    ``previous_probe_at``: the probe of this host checked before this one, if any.
    """
    open_now = {v.key(): v for v in Violation.objects.filter(device__host=host, ended_at=None)}
    sightings = {s.key(): s for s in Sighting.objects.filter(device__host=host)}
    opened, continuing = [], []
    for intrusion in intrusions:
        violation = open_now.pop(intrusion.key(), None)
        if violation is not None:
            _continue(violation, intrusion, seen_at)
            continuing.append(violation)
            continue
        sighting = sightings.pop(intrusion.key(), None)
        if sighting is None and _appeared_during_slot(intrusion, previous_probe_at):
            opened.append(_open(host, intrusion, seen_at, seen_at))
            continue
        sighting = _sight(sighting, intrusion, seen_at)
        if sighting.cycles > config.grace_cycles():
            opened.append(_open(host, intrusion, sighting.first_seen, sighting.last_seen))
            sighting.delete()
    # Whatever was not seen in this probe has ended (or was just ending).
    Violation.objects.filter(pk__in=[v.pk for v in open_now.values()]).update(ended_at=seen_at)
    Sighting.objects.filter(pk__in=[s.pk for s in sightings.values()]).delete()
    return opened, continuing


def _appeared_during_slot(intrusion: Intrusion, previous_probe_at) -> bool:
    """Whether an earlier probe checked during the reservation's slot did not have this
    process: then it started while the GPU was reserved, and no grace is due."""
    if intrusion.slot_start is None or previous_probe_at is None:
        return False  # no reservation (strict level), or no earlier probe to compare with
    return previous_probe_at >= intrusion.slot_start


def _continue(violation: Violation, intrusion: Intrusion, seen_at) -> None:
    violation.last_seen, violation.command = seen_at, intrusion.command
    violation.save(update_fields=["last_seen", "command"])


def _sight(sighting: Sighting | None, intrusion: Intrusion, seen_at) -> Sighting:
    """Count one more consecutive probe (a probe already counted is not counted twice)."""
    if sighting is None:
        return Sighting.objects.create(
            device=intrusion.device,
            pid=intrusion.pid,
            offender_unix=intrusion.offender_unix,
            reservation=intrusion.reservation,
            first_seen=seen_at,
            last_seen=seen_at,
        )
    if sighting.last_seen < seen_at:
        sighting.cycles, sighting.last_seen = sighting.cycles + 1, seen_at
        sighting.save(update_fields=["cycles", "last_seen"])
    return sighting


def container_fields(container: dict | None) -> dict:
    """The container a violation's process runs in, as the Violation stores it."""
    container = container or {}
    return {
        "container_id": container.get("id", ""),
        "container_name": container.get("name", "")[: Violation.CONTAINER_NAME_LENGTH],
    }


def _open(host: Host, intrusion: Intrusion, first_seen, last_seen) -> Violation:
    reservation = intrusion.reservation
    offender = service_user(host, intrusion.offender_unix) if intrusion.offender_unix else None
    violation = Violation.objects.create(
        device=intrusion.device,
        reservation=reservation,
        reservation_owner=reservation.owner if reservation else None,
        offender_unix=intrusion.offender_unix,
        offender=offender,
        pid=intrusion.pid,
        command=intrusion.command,
        **container_fields(intrusion.container),
        first_seen=first_seen,
        last_seen=last_seen,
    )
    log.warning("protection: %s", violation)
    return violation
