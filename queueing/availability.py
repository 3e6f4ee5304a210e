"""Which GPUs a queued job could start on now, and if not, why not (in words for people).

Read once per scheduling round from the database only (hosts' latest probes, active tasks,
claims, reservations, grants): no SSH. A GPU is usable by an owner when

- its host is up and its GPU is present;
- no active task and no queue run holds it;
- the latest probe shows no process on it, and was taken after the last task there ended
  (an older probe may still show that task's processes);
- nobody else has reserved it now or within QUEUE_RESERVATION_HORIZON minutes (the
  owner's own reservations do not block);
- the owner may use it now (accesscontrol.coverage) and has an account on its host.
"""

import getpass
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Max
from django.utils import timezone

from accesscontrol.accounts import check_run_as
from accesscontrol.coverage import active_ban, ban_sentence, check_access, coverage_map
from jobs.models import Task
from monitoring.models import Device, Host
from reservations.models import ReservedDevice

from .models import GpuClaim, QueuedJob

ONE_MINUTE = timedelta(minutes=1)


def gpu_name(device: Device) -> str:
    return f"GPU {device.index} on {device.host.name}"


def when(instant: datetime, now: datetime) -> str:
    """'14:00' today, else 'Tue 03 Mar 14:00' (site time)."""
    local, today = timezone.localtime(instant), timezone.localtime(now)
    return f"{local:%H:%M}" if local.date() == today.date() else f"{local:%a %d %b %H:%M}"


def horizon() -> timedelta:
    return timedelta(minutes=settings.QUEUE_RESERVATION_HORIZON)


@dataclass
class Gpu:
    """One GPU as the scheduler sees it this round."""

    device: Device
    # Why nobody can start on it now ("" when free); the same for every owner.
    blocker: str = ""
    # The opportunistic run holding it, when that run may be preempted for a queued job.
    opportunistic_run: int | None = None
    # Holding reservations overlapping [now, now + horizon): (owner id, owner, start, end).
    slots: list[tuple[int, str, datetime, datetime]] = field(default_factory=list)

    @property
    def host(self) -> Host:
        return self.device.host

    @property
    def name(self) -> str:
        return gpu_name(self.device)


class Cluster:
    """Every present GPU of every enabled host, with what blocks it now."""

    def __init__(self, now: datetime):
        self.now = now
        devices = Device.objects.filter(status=Device.Status.PRESENT, host__enabled=True)
        self.gpus = {d.pk: Gpu(d) for d in devices.select_related("host").order_by("pk")}
        self._owners: dict[int, dict[int, str]] = {}
        self._mark_down_hosts()
        self._mark_claims()
        self._mark_tasks()
        self._mark_processes()
        self._add_reservations()

    # --- what blocks a GPU for everybody ---------------------------------------------------

    def _block(self, device_id: int, reason: str) -> None:
        gpu = self.gpus.get(device_id)
        if gpu is not None and not gpu.blocker:
            gpu.blocker = reason

    def _mark_down_hosts(self) -> None:
        for gpu in self.gpus.values():
            host = gpu.host
            if host.status != Host.Status.UP or not (host.last_snapshot or {}).get("reachable"):
                gpu.blocker = f"{host.name} is {host.get_status_display().lower()}"

    def _mark_claims(self) -> None:
        claims = GpuClaim.objects.select_related("run__queued_job__owner")
        for claim in claims:
            queued, gpu = claim.run.queued_job, self.gpus.get(claim.device_id)
            if gpu is None:
                continue
            self._block(
                gpu.device.pk, f"{gpu.name} is used by queued job '{queued}' of {queued.owner}"
            )
            if claim.run.opportunistic and queued.state == QueuedJob.State.RUNNING:
                gpu.opportunistic_run = claim.run_id

    def _mark_tasks(self) -> None:
        through = Task.devices.through.objects.filter(task__status__in=Task.ACTIVE)
        rows = through.values_list("device_id", "task__job__name", "task__job__owner__username")
        for device_id, job, owner in rows:
            if gpu := self.gpus.get(device_id):
                self._block(device_id, f"{gpu.name} is used by job '{job}' of {owner}")

    def _last_task_ends(self) -> dict[int, datetime]:
        through = Task.devices.through.objects.filter(
            task__ended_at__gte=self.now - timedelta(hours=1)
        )
        ends = through.values("device_id").annotate(last=Max("task__ended_at"))
        return {row["device_id"]: row["last"] for row in ends}

    def _mark_processes(self) -> None:
        """Processes on GPUs that no task of ours holds are someone else's."""
        ends = self._last_task_ends()
        by_uuid = {(g.host.pk, g.device.uuid): g for g in self.gpus.values()}
        for gpu in self.gpus.values():
            end = ends.get(gpu.device.pk)
            probed = gpu.host.last_probe_at
            if end is not None and (probed is None or probed <= end):
                self._block(gpu.device.pk, f"waiting for a fresh probe of {gpu.host.name}")
        for host in {g.host for g in self.gpus.values()}:
            for process in (host.last_snapshot or {}).get("processes") or []:
                gpu = by_uuid.get((host.pk, process.get("gpu_uuid")))
                if gpu is not None:
                    who = process.get("user") or "an unknown user"
                    self._block(
                        gpu.device.pk, f"{gpu.name} runs process {process.get('pid')} of {who}"
                    )

    def _add_reservations(self) -> None:
        slots = (
            ReservedDevice.objects.filter(
                device_id__in=self.gpus,
                holds=True,
                end__gt=self.now,
                start__lt=self.now + horizon(),
            )
            .select_related("reservation__owner")
            .order_by("start")
        )
        for slot in slots:
            owner = slot.reservation.owner
            self.gpus[slot.device_id].slots.append((owner.pk, str(owner), slot.start, slot.end))

    # --- what blocks a GPU for one owner ----------------------------------------------------

    def owner_blockers(self, owner) -> dict[int, str]:
        """Device id -> why ``owner`` cannot start on it now ("" when nothing owner-specific)."""
        if owner.pk not in self._owners:
            self._owners[owner.pk] = self._blockers_of(owner)
        return self._owners[owner.pk]

    def _blockers_of(self, owner) -> dict[int, str]:
        ban = active_ban(owner)
        if ban is not None:
            return dict.fromkeys(self.gpus, ban_sentence(owner, ban))
        devices = [g.device for g in self.gpus.values()]
        covered = coverage_map(owner, self.now, self.now + ONE_MINUTE, devices)
        accounts = self._accounts(owner)
        blockers = {}
        for pk, gpu in self.gpus.items():
            blockers[pk] = (
                self._reserved_by_others(gpu, owner)
                or accounts.get(gpu.host.pk, "")
                or self._access(owner, gpu, covered[gpu.device])
            )
        return blockers

    def _reserved_by_others(self, gpu: Gpu, owner) -> str:
        for owner_id, name, start, end in gpu.slots:
            if owner_id == owner.pk:
                continue
            if start <= self.now:
                return f"{gpu.name} reserved by {name} until {when(end, self.now)}"
            return f"{gpu.name} reserved by {name} from {when(start, self.now)}"
        return ""

    def _access(self, owner, gpu: Gpu, covered: list) -> str:
        whole = covered and covered[0][0] <= self.now and covered[0][1] >= self.now + ONE_MINUTE
        if whole:
            return ""
        return check_access(owner, gpu.device, self.now, self.now + ONE_MINUTE).reason

    def _accounts(self, owner) -> dict[int, str]:
        """Host id -> why tasks of ``owner`` cannot run there (no UNIX account to run as)."""
        problems = {}
        for host in {g.host for g in self.gpus.values()}:
            try:
                name = check_run_as(owner, host).name
            except ValidationError as exc:
                problems[host.pk] = exc.messages[0]
                continue
            if host.is_local and name != getpass.getuser():
                problems[host.pk] = (
                    f"{host.name} runs tasks only as {getpass.getuser()}, not as {name}"
                )
        return problems

    # --- summaries ------------------------------------------------------------------------

    def why_not(self, owner, device_id: int) -> str:
        """Why ``owner`` cannot start on this GPU now ("" if they can)."""
        gpu = self.gpus.get(device_id)
        if gpu is None:
            return f"GPU {device_id} is lost or its host is disabled"
        return gpu.blocker or self.owner_blockers(owner)[device_id]

    def free_per_host(self) -> dict[int, int]:
        """Free GPUs per host (for everybody): best fit fills the host with the fewest."""
        counts: dict[int, int] = {}
        for gpu in self.gpus.values():
            if not gpu.blocker:
                counts[gpu.host.pk] = counts.get(gpu.host.pk, 0) + 1
        return counts
