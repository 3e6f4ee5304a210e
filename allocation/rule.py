"""The start rule: may a user start work on these GPUs now, and if not, every reason why.

One rule for everyone who starts work: a job's task (page, API, CLI), the queue, gpurun
and the placement endpoint all ask ``may_start`` (or, for a whole round, ``Cluster``).
It lives in the allocation layer, beneath every app that starts work, and asks the layers
below: who holds each GPU (``holders``: bookings, tasks, queue runs), the access maths
(accesscontrol.coverage) and the account to run as (accesscontrol.accounts). It reads the
database only (hosts' latest probes): no SSH. gpurun, which asks nvidia-smi right before
each start, passes what it saw.

A GPU is usable by a user over [start, end) when none of these holds (each has a stable
``code``, for scripts and tests, and a sentence for people):

- ``gpu_lost``: the GPU is gone from its host, or the host is disabled;
- ``host_down``: the host's latest probe failed (a host never probed has no facts against it);
- ``held_by_task`` / ``held_by_queue_run``: an active task, or a queue run, holds it (tasks of
  the job being started, and its own run, do not count);
- ``foreign_process``: the latest probe shows a process on it;
- ``stale_probe``: the latest probe is older than the end of the last task there (it may
  still show that task's processes), so it is not trusted until a fresh one comes;
- ``reserved_by_other``: someone else's booking overlaps [start, end) (by default the next
  QUEUE_RESERVATION_HORIZON minutes: "now or soon"; the user's own bookings never block);
- ``banned`` / ``no_grant``: the user is banned, or no grant lets them use it at ``start``;
- ``no_account``: the user's tasks have no UNIX account to run as on its host
  (accesscontrol.accounts.account_for).

A reason is ``lasting`` when waiting cannot lift it, only an admin can: a GPU gone, a ban
without end, no grant covering the GPU now or in the LOOKAHEAD after, no account. Queueing
or gpurun waiting on such a GPU would wait for ever, so they are not offered or done.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import Model
from django.utils import timezone

from accesscontrol import changes
from accesscontrol.accounts import RunAs, account_for
from accesscontrol.coverage import (
    ONE_MINUTE,
    active_ban,
    ban_sentence,
    coverage_map,
    covers_next_minute,
    waiting_sentence,
)
from monitoring.containers import owner_text
from monitoring.models import Device, Host, sharing

from .holders import QUEUE_RUN, RESERVATION, TASK, Holding, holders

# How far ahead a grant may begin and still count: after this, waiting is "for ever".
LOOKAHEAD = timedelta(days=366)
# How far back a task's end may make a probe stale (a probe older than this is read anyway).
STALE_LOOKBACK = timedelta(hours=1)

# Host id -> the processes seen on its GPUs just now ({"gpu_uuid", "pid", "user", "name"}).
Processes = dict[int, list[dict[str, Any]]]
# Device -> the intervals [start, end) its grants cover (accesscontrol.coverage).
Coverage = dict[Device, list[tuple[datetime, datetime]]]

# The reasons' codes, most telling first (the order reasons are listed in).
GPU_LOST = "gpu_lost"
HOST_DOWN = "host_down"
HELD_BY_TASK = "held_by_task"
HELD_BY_QUEUE_RUN = "held_by_queue_run"
STALE_PROBE = "stale_probe"
FOREIGN_PROCESS = "foreign_process"
RESERVED_BY_OTHER = "reserved_by_other"
BANNED = "banned"
NO_GRANT = "no_grant"
NO_ACCOUNT = "no_account"
CODES = (
    GPU_LOST,
    HOST_DOWN,
    HELD_BY_TASK,
    HELD_BY_QUEUE_RUN,
    STALE_PROBE,
    FOREIGN_PROCESS,
    RESERVED_BY_OTHER,
    BANNED,
    NO_GRANT,
    NO_ACCOUNT,
)


@dataclass(frozen=True)
class Reason:
    """Why one GPU cannot be started on: a stable code and a sentence."""

    code: str
    device_id: int
    text: str
    lasting: bool = False  # waiting cannot lift it; only an admin can

    def as_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "device": self.device_id,
            "detail": self.text,
            "lasting": self.lasting,
        }


def gpu_name(device: Device) -> str:
    return f"GPU {device.label} on {device.host.name}"


def when(instant: datetime, now: datetime) -> str:
    """'14:00' today, else 'Tue 03 Mar 14:00' (site time)."""
    local, today = timezone.localtime(instant), timezone.localtime(now)
    return f"{local:%H:%M}" if local.date() == today.date() else f"{local:%a %d %b %H:%M}"


def horizon() -> timedelta:
    return timedelta(minutes=settings.QUEUE_RESERVATION_HORIZON)


@dataclass
class Gpu:
    """One GPU as the rule sees it: what blocks it for everybody, and who booked it."""

    device: Device
    # Why nobody can start on it now (empty when free); the same for every user.
    blockers: list[Reason] = field(default_factory=list)
    # The opportunistic run holding it, when that run may be preempted for a queued job.
    opportunistic_run: int | None = None
    # Holding reservations overlapping the range: (owner id, owner, start, end).
    slots: list[tuple[int, str, datetime, datetime]] = field(default_factory=list)

    @property
    def host(self) -> Host:
        return self.device.host

    @property
    def name(self) -> str:
        return gpu_name(self.device)

    @property
    def blocker(self) -> str:
        """The first reason nobody can start on it ("" when free)."""
        return self.blockers[0].text if self.blockers else ""


class Cluster:
    """Present GPUs of enabled hosts (all, or ``device_ids``), with what blocks each.

    ``[now, end)`` is the range asked about (reservations; ``end`` defaults to the horizon).
    ``job``: the job being started, whose own tasks and queue run do not block it.
    ``processes``: host id -> processes seen just now ({"gpu_uuid", "pid", "user"}), used
    instead of those hosts' latest probes.

    A GPU and its MIG slices share hardware (monitoring.models.sharing): what holds or runs
    on one blocks the other too, bookings included; two slices of one GPU are apart.
    """

    def __init__(
        self,
        now: datetime,
        end: datetime | None = None,
        device_ids: Iterable[int] | None = None,
        job: Model | None = None,  # a jobs.Job: only its id is read
        processes: Processes | None = None,
    ) -> None:
        self.now, self.end = now, end or now + horizon()
        self.job_id = job.pk if job is not None else None
        devices = Device.objects.filter(status=Device.Status.PRESENT, host__enabled=True)
        if device_ids is not None:
            devices = devices.filter(pk__in=device_ids)
        self.gpus = {d.pk: Gpu(d) for d in devices.select_related("host").order_by("pk")}
        self.family = _families(self.gpus)
        # Any of these devices' id -> the ids of the GPUs asked about sharing its hardware.
        self._devices = {d.pk: d for shared in self.family.values() for d in shared}
        self._sharers: dict[int, list[int]] = {}
        for pk, shared in self.family.items():
            for device in shared:
                self._sharers.setdefault(device.pk, []).append(pk)
        self._users: dict[int, dict[int, list[Reason]]] = {}
        self._run_as: dict[tuple[int, int], RunAs] = {}  # (user id, host id) -> its account
        seen_now = processes or {}
        self._mark_down_hosts()
        asked = [gpu.device for gpu in self.gpus.values()]
        for holding in holders(self._since(seen_now), self.end, devices=asked):
            self._add_holding(holding, seen_now)
        self._mark_processes(seen_now)
        for gpu in self.gpus.values():  # one sentence per kind of reason is enough for people
            gpu.blockers = _first_of_each(gpu.blockers)

    # --- what blocks a GPU for everybody ---------------------------------------------------

    def _block(self, device_id: int, code: str, text: str) -> None:
        """``text`` blocks the device and every GPU asked about that shares its hardware."""
        for pk in self._sharers.get(device_id, ()):
            self.gpus[pk].blockers.append(Reason(code, pk, text))

    def sharing_with(self, device_id: int) -> list[int]:
        """The ids of these GPUs that share hardware with the device (itself included)."""
        return self._sharers.get(device_id, [])

    def _name(self, device_id: int) -> str:
        return gpu_name(self._devices[device_id])

    def _mark_down_hosts(self) -> None:
        for gpu in self.gpus.values():
            host = gpu.host
            if host.status not in (Host.Status.UP, Host.Status.UNKNOWN) or (
                host.status == Host.Status.UP and not (host.last_snapshot or {}).get("reachable")
            ):
                status = host.get_status_display().lower()
                self._block(gpu.device.pk, HOST_DOWN, f"{host.name} is {status}")

    def _since(self, seen_now: dict) -> datetime | None:
        """Where the holders asked about begin: at the oldest probe read (within the
        STALE_LOOKBACK), so the tasks that ended after it are found; None (now) when no
        probe is read."""
        probes = [
            gpu.host.last_probe_at
            for gpu in self.gpus.values()
            if gpu.host.pk not in seen_now and gpu.host.last_probe_at is not None
        ]
        return max(min(probes), self.now - STALE_LOOKBACK) if probes else None

    def _add_holding(self, holding: Holding, seen_now: dict) -> None:
        """A holding of the GPU or of a device sharing its hardware (its GPU, its slices)."""
        gpu = self.gpus[holding.device_id]
        own = holding.job_id is not None and holding.job_id == self.job_id
        held = gpu.name if holding.shared_from is None else self._name(holding.shared_from)
        if holding.kind == RESERVATION and holding.overlaps(self.now, self.end):
            start, end = holding.start, holding.end
            if start is not None and end is not None:  # a booking always has both
                gpu.slots.append((holding.owner_id, holding.owner, start, end))
        elif holding.kind == TASK and holding.end is not None:
            self._mark_stale_probe(gpu, holding.end, seen_now)
        elif holding.kind == TASK and not own:
            text = f"{held} is used by job '{holding.name}' of {holding.owner}"
            gpu.blockers.append(Reason(HELD_BY_TASK, gpu.device.pk, text))
        elif holding.kind == QUEUE_RUN and not own:
            text = f"{held} is used by queued job '{holding.name}' of {holding.owner}"
            gpu.blockers.append(Reason(HELD_BY_QUEUE_RUN, gpu.device.pk, text))
            # Preempting frees the claimed device itself, not a GPU sharing its hardware.
            if holding.preemptible and holding.shared_from is None:
                gpu.opportunistic_run = holding.holder_id

    def _mark_stale_probe(self, gpu: Gpu, task_end: datetime, seen_now: dict) -> None:
        """A probe taken before a task on the GPU ended may show that task's processes, or
        miss a failure it left: not trusted until the next one (processes seen just now
        are). A host never probed has no snapshot to misread."""
        probed = gpu.host.last_probe_at
        if gpu.host.pk in seen_now or probed is None or probed > task_end:
            return
        text = f"waiting for a fresh probe of {gpu.host.name}"
        gpu.blockers.append(Reason(STALE_PROBE, gpu.device.pk, text))

    def _mark_processes(self, seen_now: Processes) -> None:
        """Processes on GPUs that no task of ours holds are someone else's."""
        by_uuid: dict[tuple[int, object], Device] = {
            (d.host_id, d.uuid): d for d in self._devices.values()
        }
        for host in {g.host for g in self.gpus.values()}:
            processes = seen_now.get(host.pk, (host.last_snapshot or {}).get("processes"))
            for process in processes or []:
                device = by_uuid.get((host.pk, process.get("gpu_uuid")))
                if device is not None:
                    text = f"{gpu_name(device)} runs process {process.get('pid')}"
                    text += f" ({process['name']})" if process.get("name") else ""
                    known = process.get("user") or process.get("container")
                    text += f" of {owner_text(process)}" if known else ""
                    self._block(device.pk, FOREIGN_PROCESS, text)

    # --- what blocks a GPU for one user -----------------------------------------------------

    def user_reasons(self, user: User) -> dict[int, list[Reason]]:
        """Device id -> why ``user`` in particular cannot start on it (empty: nothing)."""
        if user.pk not in self._users:
            self._users[user.pk] = self._reasons_of(user)
        return self._users[user.pk]

    def owner_blockers(self, owner: User) -> dict[int, str]:
        """Device id -> the first user-specific reason as a sentence ("" when none)."""
        return {pk: (r[0].text if r else "") for pk, r in self.user_reasons(owner).items()}

    def _reasons_of(self, user: User) -> dict[int, list[Reason]]:
        devices = [g.device for g in self.gpus.values()]
        # The user's kept facts (grants, bans, an account per host), under one token read.
        with changes.one_token():
            # No coverage at all when banned now; only then is the ban read for its sentence.
            covered = coverage_map(user, self.now, self.now + ONE_MINUTE, devices)
            ban = active_ban(user, self.now) if not all(covered.values()) else None
            ahead = self._coverage_ahead(user, covered) if ban is None else {}
            accounts_problems = self._accounts(user)
        reasons = {}
        for pk, gpu in self.gpus.items():
            found = self._reserved_by_others(gpu, user)
            if ban is not None:
                found.append(Reason(BANNED, pk, ban_sentence(user, ban), ban.until is None))
            elif gpu.device in ahead:
                later = ahead[gpu.device]
                text = waiting_sentence(user, gpu.device, later, self.now)
                found.append(Reason(NO_GRANT, pk, text, lasting=not later))
            if why := accounts_problems.get(gpu.host.pk):
                found.append(Reason(NO_ACCOUNT, pk, why, lasting=True))
            reasons[pk] = found
        return reasons

    def _coverage_ahead(self, user: User, covered: Coverage) -> Coverage:
        """Device -> its coverage over the LOOKAHEAD from now, for each device the user may
        not use for the whole next minute (the others are not in it)."""
        short = [d for d, spans in covered.items() if not covers_next_minute(spans, self.now)]
        if not short:
            return {}
        ahead = coverage_map(user, self.now, self.now + LOOKAHEAD, short)
        # A stretch that ends within the minute a start needs does not make it usable now.
        return {d: [i for i in found if i[1] > self.now] for d, found in ahead.items()}

    def _reserved_by_others(self, gpu: Gpu, user: User) -> list[Reason]:
        for owner_id, name, start, end in gpu.slots:
            if owner_id == user.pk:
                continue
            if start <= self.now:
                text = f"{gpu.name} reserved by {name} until {when(end, self.now)}"
            else:
                text = f"{gpu.name} reserved by {name} from {when(start, self.now)}"
            return [Reason(RESERVED_BY_OTHER, gpu.device.pk, text)]
        return []

    def _accounts(self, user: User) -> dict[int, str]:
        """Host id -> why tasks of ``user`` cannot run there (no UNIX account to run as)."""
        problems = {}
        for host in {g.host for g in self.gpus.values()}:
            try:
                self._run_as[user.pk, host.pk] = account_for(user, host)
            except ValidationError as exc:
                problems[host.pk] = " ".join(exc.messages)
        return problems

    def account(self, user: User, host: Host) -> RunAs | None:
        """The UNIX account ``user``'s tasks run as on ``host`` and its UID floor, as the rule
        found them (a start uses them, instead of asking again); None where it did not look
        (no GPU of that host was asked about) or found none."""
        self.user_reasons(user)
        return self._run_as.get((user.pk, host.pk))

    # --- answers ----------------------------------------------------------------------------

    def reasons(self, user: User, device_id: int) -> list[Reason]:
        """Every reason ``user`` cannot start on this GPU now (empty if they can)."""
        gpu = self.gpus.get(device_id)
        if gpu is None:
            return [Reason(GPU_LOST, device_id, lost_sentence(device_id), lasting=True)]
        return gpu.blockers + self.user_reasons(user)[device_id]

    def why_not(self, user: User, device_id: int) -> str:
        """The most telling reason as a sentence ("" if they can)."""
        found = self.reasons(user, device_id)
        return found[0].text if found else ""

    def free_per_host(self) -> dict[int, int]:
        """Free GPUs per host (for everybody): best fit fills the host with the fewest."""
        counts: dict[int, int] = {}
        for gpu in self.gpus.values():
            if not gpu.blockers:
                counts[gpu.host.pk] = counts.get(gpu.host.pk, 0) + 1
        return counts


def lost_sentence(device_id: int) -> str:
    """Named as people know it (host and index), while its row is still there."""
    device = Device.objects.filter(pk=device_id).select_related("host").first()
    name = gpu_name(device) if device else f"GPU {device_id}"
    return f"{name} is lost or its host is disabled"


def _families(gpus: dict[int, Gpu]) -> dict[int, list[Device]]:
    """GPU id -> the devices sharing its hardware, itself first (one query, and none where
    no GPU is a MIG slice or in MIG mode)."""
    if not any(g.device.parent_id or g.device.mig_enabled for g in gpus.values()):
        return {pk: [g.device] for pk, g in gpus.items()}
    return sharing(gpus)


def _first_of_each(reasons: list[Reason]) -> list[Reason]:
    """One reason per code, ordered as CODES lists them."""
    first: dict[str, Reason] = {}
    for reason in reasons:
        first.setdefault(reason.code, reason)
    return sorted(first.values(), key=lambda r: CODES.index(r.code))


def may_start(
    user: User,
    devices: Iterable[Device],
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    job: Model | None = None,  # a jobs.Job: only its id is read
    processes: Processes | None = None,
) -> list[Reason]:
    """Every reason ``user`` may not start work on ``devices`` over [start, end) (empty: they
    may). ``start`` defaults to now, ``end`` to the reservation horizon after it; ``job`` and
    ``processes`` as for Cluster."""
    return start_rule(user, devices, start, end, job=job, processes=processes)[0]


def start_rule(
    user: User,
    devices: Iterable[Device],
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    job: Model | None = None,  # a jobs.Job: only its id is read
    processes: Processes | None = None,
) -> tuple[list[Reason], Cluster]:
    """``may_start``'s reasons, and the Cluster that gave them (a start reads the account
    to run as from it)."""
    start = start or timezone.now()
    ids = [d.pk for d in devices]
    cluster = Cluster(start, end, device_ids=ids, job=job, processes=processes)
    found = [reason for pk in ids for reason in cluster.reasons(user, pk)]
    return list(dict.fromkeys(found)), cluster
