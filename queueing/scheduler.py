"""The scheduler: rounds that close ended runs, preempt, place waiting jobs and start them.

A round (``run_round``) runs in the django-q workers after each monitoring cycle, after a
reservation or queue entry changed, and (through the sync it does first) when a task ends.
``dispatch`` wraps it in a lease (one round at a time cluster-wide) and a request counter (an
event arriving during a round makes the holder run again, so none is lost).

Two guarantees do not depend on the lease: a job starts by a conditional UPDATE from
"waiting" (one winner), and its GPUs are claimed by inserting GpuClaim rows whose device is
unique, in the same transaction, so two rounds that planned the same GPU cannot both start.
All of a job's tasks are claimed and created together and spawned together; if one cannot
start, the others are killed and the job waits again (never a partial start).
"""

import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone

from allocation.placement import Pool, Request, Slot, place_job, place_request
from allocation.rule import Cluster, gpu_name, lost_sentence, when
from audit.log import record
from core import lease
from jobs import actions as job_actions
from jobs import services as job_services
from jobs.models import Task, derive_status
from monitoring.models import Device
from notifications.send import notify
from reservations.models import Reservation, ReservedDevice

from . import services
from .models import DispatchRequest, GpuClaim, QueuedJob, QueuedTask, QueueRun

log = logging.getLogger(__name__)
ACTIVITY = "queue-dispatch"
MAX_REPEATS = 5
State, Outcome = QueuedJob.State, QueueRun.Outcome


# --- dispatch: one round at a time, no request lost -----------------------------------------


def request_round() -> int:
    """Note that something changed; returns the new request count."""
    DispatchRequest.objects.get_or_create(pk=1)
    DispatchRequest.objects.filter(pk=1).update(requested=F("requested") + 1)
    return requested()


def requested() -> int:
    return DispatchRequest.objects.filter(pk=1).values_list("requested", flat=True).first() or 0


def lease_seconds() -> float:
    """Longer than a worker may run a task (django-q kills it then), so a lease outlives
    only dead holders by a little."""
    return settings.Q_CLUSTER.get("timeout", 120) + 30


def dispatch() -> str:
    """The django-q task: run rounds until no request arrived during the last one (at most
    MAX_REPEATS; the next monitoring cycle asks again)."""
    request_round()
    holder = f"{socket.gethostname()}:{os.getpid()}:{id(object())}"
    summary = "another dispatcher is running: it will run this request"
    rounds = 0
    while rounds < MAX_REPEATS:
        if not lease.acquire(ACTIVITY, holder, lease_seconds()):
            return summary
        try:
            seen = -1
            while requested() != seen and rounds < MAX_REPEATS:
                seen, rounds = requested(), rounds + 1
                summary = safe_round()
        finally:
            lease.release(ACTIVITY, holder)
        if requested() == seen:  # nothing slipped in between our last look and the release
            return summary
    return summary


def safe_round() -> str:
    try:
        summary = run_round()
    except Exception as exc:  # recorded where admins look; the next event tries again
        log.exception("queue: round failed")
        lease.record_failure(ACTIVITY, exc)
        return f"round failed: {exc}"
    lease.record_success(ACTIVITY, summary)
    return summary


def run_round(now: datetime | None = None) -> str:
    closed = close_ended_runs()
    now = now or timezone.now()
    preempted = preempt_for_reservations(now)
    plan = plan_round(now)
    for run_id, reason in plan.preemptions.items():
        preempt(QueueRun.objects.get(pk=run_id), reason)
    started = sum(start_safely(queued, placed) for queued, placed in plan.starts)
    save_reasons(plan.waiting, now)
    return (
        f"{closed} runs ended, {preempted + len(plan.preemptions)} preempted, "
        f"{started} started, {len(plan.waiting)} waiting"
    )


# --- closing runs whose tasks ended ----------------------------------------------------------


def open_runs():
    return QueueRun.objects.filter(ended_at=None).select_related("queued_job", "job")


def close_ended_runs() -> int:
    """Ask the hosts which tasks of open runs ended (jobs' sync), then close those runs."""
    runs = list(open_runs())
    # Not "starting": such a task has no screen session yet, and a sync would fail it while
    # its start is still running (interrupted starts are jobs' recover_start's to settle).
    syncable = [Task.Status.RUNNING, Task.Status.STOPPING]
    active = Task.objects.filter(job__queue_run__in=runs, status__in=syncable)
    # A host that does not answer keeps its runs open until it is back; one that fails the
    # sync is recorded and retried next round; the other hosts' runs close all the same.
    tasks, _ = job_services.on_reachable_hosts(list(active.select_related("host")))
    outcome = job_services.sync_by_host(tasks)
    if outcome.failures:
        failed = "; ".join(map(str, outcome.failures))
        lease.record_failure(ACTIVITY, f"sync of queue tasks: {failed}")
    return sum(close_if_ended(run) for run in runs)


def close_if_ended(run: QueueRun) -> bool:
    run.refresh_from_db(fields=["outcome", "ended_at"])
    run.queued_job.refresh_from_db()
    states = list(run.job.tasks.values_list("status", "exit_code"))
    if start_was_interrupted(run, states):
        tasks = list(run.job.tasks.select_related("host", "job__owner"))
        abort_start(run, tasks, "its start was interrupted (the worker starting it stopped)")
        return False
    if any(status in Task.ACTIVE or status == Task.Status.PENDING for status, _ in states):
        return False
    outcome = run.outcome or (
        Outcome.FINISHED if derive_status(states) == "succeeded" else Outcome.FAILED
    )
    with transaction.atomic():
        if not QueueRun.objects.filter(pk=run.pk, ended_at=None).update(
            ended_at=timezone.now(), outcome=outcome
        ):
            return False
        GpuClaim.objects.filter(run=run).delete()
        _after_run(run.queued_job, outcome)
    return True


def start_was_interrupted(run: QueueRun, states) -> bool:
    """Still "starting" with unspawned tasks long after any round could have ended: the
    worker died mid-start (no round outlives its lease)."""
    if run.queued_job.state != State.STARTING or run.outcome:
        return False
    stale = run.started_at < timezone.now() - timedelta(seconds=lease_seconds())
    return stale and any(status == Task.Status.PENDING for status, _ in states)


def _after_run(queued: QueuedJob, outcome: str) -> None:
    jobs = QueuedJob.objects.filter(pk=queued.pk)
    if outcome == Outcome.START_FAILED:
        return  # start_job already decided where the job goes
    if queued.state == State.STOPPING and queued.requeue_after_stop:
        jobs.update(state=State.WAITING, reasons=[f"requeued: {queued.stop_reason}"])
    elif outcome in (Outcome.FINISHED, Outcome.FAILED):
        jobs.update(state=State.FINISHED if outcome == Outcome.FINISHED else State.FAILED)
    elif outcome == Outcome.CANCELLED:
        jobs.update(state=State.CANCELLED)
    else:
        jobs.update(state=State.PREEMPTED)


# --- stopping runs ---------------------------------------------------------------------------


def stop_run(
    run: QueueRun, reason: str, *, requeue: bool, outcome: str, user=None, later=False
) -> None:
    """Stop a run's tasks gracefully (SIGTERM, SIGKILL after JOBS_STOP_GRACE_SECONDS);
    ``later``: hand the stops to the workers (a request never reaches a host)."""
    changed = QueuedJob.objects.filter(pk=run.queued_job_id, state__in=QueuedJob.HOLDING).update(
        state=State.STOPPING, stop_reason=reason, requeue_after_stop=requeue
    )
    QueueRun.objects.filter(pk=run.pk, ended_at=None).update(outcome=outcome)
    if changed:
        stop_running_tasks(run, user, later=later)


def stop_running_tasks(run: QueueRun, user=None, later=False) -> None:
    """SIGTERM each running task of the run; one that cannot be stopped is recorded and the
    others are still stopped."""
    stop = (lambda t, u: job_actions.request(t, u, "stop")) if later else job_services.stop_task
    for task in run.job.tasks.filter(status=Task.Status.RUNNING).select_related("host"):
        try:
            stop(task, user)
        except (ValidationError, PermissionDenied) as exc:
            lease.record_failure(ACTIVITY, f"stopping task {task.pk}: {exc}")


def preempt(run: QueueRun, reason: str) -> None:
    queued = run.queued_job
    requeue = queued.requeue_on_preemption
    stop_run(run, reason, requeue=requeue, outcome=Outcome.PREEMPTED)
    record("queue.preempt", target=queued, reason=reason, requeued=requeue)
    tell_owner(run, reason, requeue)


def tell_owner(run: QueueRun, reason: str, requeue: bool) -> None:
    """Tell the owner their queued job is being stopped, on their channels (once per run)."""
    queued = run.queued_job
    then = (
        "It goes back to the queue and starts again by itself when GPUs are free."
        if requeue
        else "You asked not to requeue it: queue it again when you want."
    )
    body = f"Your queued job '{queued}' is being stopped: {reason}.\n\n{then}\n"
    subject = f"GPU Hive: queued job '{queued}' stopped"
    notify(queued.owner, "queued_stopped", f"queue-run-{run.pk}-stopped", subject, body)


def lead() -> timedelta:
    return timedelta(seconds=settings.QUEUE_PREEMPT_LEAD_SECONDS)


def preempt_for_reservations(now: datetime) -> int:
    """Stop running queue jobs on GPUs that someone else's reservation takes soon."""
    slots = (
        ReservedDevice.objects.holding(now, now + lead())
        .filter(
            reservation__status=Reservation.Status.CONFIRMED,
            device__queue_claim__run__ended_at=None,
            device__queue_claim__run__queued_job__state=State.RUNNING,
        )
        .exclude(reservation__owner=F("device__queue_claim__run__queued_job__owner"))
        .select_related("device__host", "reservation__owner", "device__queue_claim__run")
        .order_by("start")
    )
    done = set()
    for slot in slots:
        run = slot.device.queue_claim.run
        if run.pk in done:
            continue
        done.add(run.pk)
        preempt(
            run,
            f"{gpu_name(slot.device)} is reserved by {slot.reservation.owner} "
            f"from {when(slot.start, now)}",
        )
    return len(done)


# --- planning --------------------------------------------------------------------------------


@dataclass
class Plan:
    starts: list[tuple[QueuedJob, list[list[Slot]]]] = field(default_factory=list)
    waiting: dict[int, list[str]] = field(default_factory=dict)
    preemptions: dict[int, str] = field(default_factory=dict)  # run id -> why


def request_of(task: QueuedTask) -> Request:
    return Request(
        kind=task.kind,
        count=task.gpu_count,
        device_ids=tuple(d.pk for d in task.devices.all()),
        host_id=task.host_id,
        model=task.gpu_model,
        min_memory_mib=task.min_memory_mib,
        mig_profile=task.mig_profile,
    )


class Round:
    """The state of one planning round: what is free, taken, and each group's use."""

    def __init__(self, now: datetime):
        self.cluster = Cluster(now)
        self.free_per_host = self.cluster.free_per_host()
        self.taken: dict[int, str] = {}  # device id -> the job ahead that gets it
        self.used = services.gpus_in_use()
        self.quotas = services.quotas()
        self.plan = Plan()

    def open_slots(self, owner, with_opportunistic=False) -> dict[int, Slot]:
        blockers = self.cluster.owner_blockers(owner)
        slots = {}
        for pk, gpu in self.cluster.gpus.items():
            if pk in self.taken or blockers[pk]:
                continue
            if not gpu.blocker:
                slots[pk] = Slot.of(gpu.device)
            elif with_opportunistic and gpu.opportunistic_run is not None:
                slots[pk] = Slot.of(gpu.device, gpu.opportunistic_run)
        return slots

    def take(self, slot: Slot, queued: QueuedJob) -> None:
        """The slot goes to ``queued``: so does, this round, what shares its hardware (a GPU
        and its MIG slices)."""
        for pk in self.cluster.sharing_with(slot.device_id):
            self.taken.setdefault(pk, str(queued))

    def consider(self, queued: QueuedJob) -> None:
        requests = [request_of(t) for t in queued.tasks.all()]
        need = sum(r.size for r in requests)
        quota = self.quotas.get(queued.group_id)
        used = self.used.get(queued.group_id, 0)
        if quota and not queued.opportunistic and used + need > quota.max_gpus:
            self.plan.waiting[queued.pk] = [services.quota_sentence(quota, used, need)]
            return
        pool = Pool(self.open_slots(queued.owner), self.free_per_host)
        placed = place_job(requests, pool)
        if placed is None and not queued.opportunistic:
            if self.preempt_opportunistic(queued, requests):
                return
        if placed is None:
            self.plan.waiting[queued.pk] = explain(self, queued, requests)
            return
        self.plan.starts.append((queued, placed))
        self.free_per_host = pool.free_per_host  # best fit for the jobs behind sees this one
        self.hold(queued, placed, need)

    def hold(self, queued: QueuedJob, placed: list[list[Slot]], need: int) -> None:
        for slot in (s for slots in placed for s in slots):
            self.take(slot, queued)
        if not queued.opportunistic:
            self.used[queued.group_id] = self.used.get(queued.group_id, 0) + need

    def preempt_opportunistic(self, queued: QueuedJob, requests: list[Request]) -> bool:
        """Place on GPUs of opportunistic runs if that is what it takes; stop those runs."""
        pool = Pool(self.open_slots(queued.owner, True), dict(self.free_per_host))
        placed = place_job(requests, pool)
        if placed is None:
            return False
        chosen = [s for slots in placed for s in slots]
        runs = {s.preempts for s in chosen if s.preempts is not None}
        for slot in chosen:  # kept for this job: nobody behind it takes them meanwhile
            self.take(slot, queued)
        names = ", ".join(
            gpu_name(self.cluster.gpus[s.device_id].device)
            for s in chosen
            if s.preempts is not None
        )
        for run_id in runs:
            self.plan.preemptions.setdefault(
                run_id, f"its GPUs are needed by '{queued}', which is within its group's quota"
            )
        self.plan.waiting[queued.pk] = [f"waiting for opportunistic jobs to stop on {names}"]
        return True


def plan_round(now: datetime) -> Plan:
    state = Round(now)
    related = QueuedJob.objects.select_related("owner", "group").prefetch_related("tasks__devices")
    waiting = services.waiting_in_order(related)
    for queued in waiting:
        state.consider(queued)
    add_fair_share(state.plan, waiting)
    return state.plan


def add_fair_share(plan: Plan, waiting: list[QueuedJob]) -> None:
    """Say each waiting user's factor where it orders them among equals."""
    shares = services.waiting_shares(waiting)
    if not shares.user_average:
        return
    for queued in waiting:
        if queued.pk in plan.waiting:
            plan.waiting[queued.pk].append(shares.sentence(queued.owner_id, queued.group_id))


# --- why a job waits ---------------------------------------------------------------------------


def explain(state: Round, queued: QueuedJob, requests: list[Request]) -> list[str]:
    """Sentences saying why the job cannot start now, most telling first."""
    pool = Pool(state.open_slots(queued.owner), dict(state.free_per_host))
    reasons = []
    for request in requests:
        if place_request(request, pool) is None:
            reasons += _explain_request(state, queued.owner, request)
    if not reasons:
        total = sum(r.size for r in requests)
        reasons.append(
            f"its {len(requests)} tasks need {total} GPU{pluralize(total)} at once: together they "
            f"do not fit on the usable GPUs now"
        )
        for request in requests:
            reasons += _explain_request(state, queued.owner, request)[1:]
    if estimate := expected_start(state, queued.owner, requests):
        reasons.append(estimate)
    return list(dict.fromkeys(reasons))


# --- when it should start (as Slurm's squeue --start) -------------------------------------------


def expected_start(state: Round, owner, requests: list[Request]) -> str:
    """'expected start: about 14:00 …' when only other users' reservations stand in the
    way, whose ends are known; '' when something of unknown length does (a running job, a
    process, a job ahead in the queue, access rules)."""
    times = [request_free_at(state, owner, r) for r in requests]
    if not times or None in times or max(times) <= state.cluster.now:
        return ""
    return (
        f"expected start: about {when(max(times), state.cluster.now)}, when the reservations "
        "in its way end (if nothing else takes the GPUs first)"
    )


def gpu_free_at(state: Round, owner, gpu) -> datetime | None:
    """When this GPU should be usable by ``owner``; None when nobody can tell."""
    if gpu.blocker or gpu.device.pk in state.taken:
        return None
    others = [end for owner_id, _, _, end in gpu.slots if owner_id != owner.pk]
    if others:
        return max(others)
    return None if state.cluster.owner_blockers(owner)[gpu.device.pk] else state.cluster.now


def request_free_at(state: Round, owner, request: Request) -> datetime | None:
    by_host: dict[int, list[datetime]] = {}
    for gpu in state.cluster.gpus.values():
        if request.matches(Slot.of(gpu.device)):
            at = gpu_free_at(state, owner, gpu)
            if at is not None:
                by_host.setdefault(gpu.host.pk, []).append(at)
    if request.kind == "devices":
        known = [t for times in by_host.values() for t in times]
        return max(known) if len(known) == len(request.device_ids) else None
    if request.kind == "one_host":
        fits = [sorted(t)[request.count - 1] for t in by_host.values() if len(t) >= request.count]
        return min(fits, default=None)
    known = sorted(t for times in by_host.values() for t in times)
    return known[request.count - 1] if len(known) >= request.count else None


def _label(request: Request, free: bool = False) -> str:
    """E.g. '4 free GPUs of model A100 with 40000 MiB'."""
    plural = "s" if request.count != 1 else ""
    what = f"MIG {request.mig_profile} slice{plural}" if request.mig_profile else f"GPU{plural}"
    text = f"{request.count} {'free ' if free else ''}{what}"
    if request.model:
        text += f" of model {request.model}"
    if request.min_memory_mib:
        text += f" with {request.min_memory_mib} MiB"
    return text


def _explain_request(state: Round, owner, request: Request) -> list[str]:
    cluster = state.cluster
    matching = [g for g in cluster.gpus.values() if request.matches(Slot.of(g.device))]
    if request.kind == "devices":
        missing = set(request.device_ids) - {g.device.pk for g in matching}
        head = [lost_sentence(pk) for pk in sorted(missing)]
        return head + _blocked(state, owner, matching, shown=len(matching))
    if request.kind == "one_host":
        per_host: dict[int, int] = {}
        for gpu in matching:
            per_host[gpu.host.pk] = per_host.get(gpu.host.pk, 0) + 1
        host = _host_name(cluster, request.host_id)
        subject = f"{host} does not have" if host else "no host has"
        if max(per_host.values(), default=0) < request.count:
            return [f"{subject} {_label(request)}"]
        head = f"{subject} {_label(request, free=True)}"
    else:
        if len(matching) < request.count:
            gpus = f"{len(matching)} GPU{pluralize(matching)}"
            return [f"there are only {gpus} in all for {_label(request)}"]
        head = f"the hosts together do not have {_label(request, free=True)}"
    return [head] + _blocked(state, owner, matching)


def _host_name(cluster: Cluster, host_id: int | None) -> str:
    for gpu in cluster.gpus.values():
        if gpu.host.pk == host_id:
            return gpu.host.name
    return ""


def _blocked(state: Round, owner, gpus: list, shown: int = 3) -> list[str]:
    reasons = []
    for gpu in gpus:
        pk = gpu.device.pk
        if pk in state.taken:
            reasons.append(f"{gpu.name} goes to '{state.taken[pk]}', ahead in the queue")
        elif why := state.cluster.why_not(owner, pk):
            reasons.append(why)
    unique = list(dict.fromkeys(reasons))
    more = len(unique) - shown
    return unique[:shown] + ([f"and {more} more busy or reserved GPUs"] if more > 0 else [])


def save_reasons(waiting: dict[int, list[str]], now: datetime) -> None:
    for pk, reasons in waiting.items():
        QueuedJob.objects.filter(pk=pk, state=State.WAITING).update(reasons=reasons, reasons_at=now)


# --- gang start --------------------------------------------------------------------------------


def job_specs(queued: QueuedJob, placed: list[list[Slot]]):
    """jobs.services specs for a placement: one per host a queued task landed on."""
    specs = []
    for task, slots in zip(queued.tasks.all(), placed, strict=True):
        hosts: dict[int, list[int]] = {}
        for slot in slots:
            hosts.setdefault(slot.host_id, []).append(slot.device_id)
        devices = {d.pk: d for d in _devices(slots)}
        nodes = list(hosts.items())
        master = devices[nodes[0][1][0]].host.address
        for rank, (_, ids) in enumerate(nodes):
            extra = {}
            if task.kind == QueuedTask.Kind.ANY_HOSTS:
                extra = {
                    "HIVE_NODE_RANK": str(rank),
                    "HIVE_NNODES": str(len(nodes)),
                    "HIVE_MASTER_ADDR": master,
                }
            gpus = [devices[pk] for pk in ids]
            specs.append(services.spec_for(task, gpus[0].host, gpus, extra))
    return specs


def _devices(slots: list[Slot]):
    return Device.objects.filter(pk__in=[s.device_id for s in slots]).select_related("host")


def claim(queued: QueuedJob, placed: list[list[Slot]]) -> QueueRun | None:
    """Turn the placement into a jobs.Job and claim its GPUs, in one transaction."""
    slots = [s for group in placed for s in group]
    try:
        with transaction.atomic():
            if not QueuedJob.objects.filter(pk=queued.pk, state=State.WAITING).update(
                state=State.STARTING, reasons=[], reasons_at=timezone.now(), stop_reason=""
            ):
                return None  # cancelled, or started by another round
            run = QueueRun.objects.create(
                queued_job=queued,
                job=job_services.create_job(
                    queued.owner,
                    name=queued.name,
                    specs=job_specs(queued, placed),
                    description=f"Started by the queue (queued job {queued.pk}).",
                    capped=False,
                ),
                opportunistic=queued.opportunistic,
                gpus=len(slots),
            )
            GpuClaim.objects.bulk_create([GpuClaim(device_id=s.device_id, run=run) for s in slots])
    except IntegrityError:
        note = "a GPU it was placed on was taken by another scheduler round just now"
        QueuedJob.objects.filter(pk=queued.pk, state=State.WAITING).update(reasons=[note])
        return None
    return run


def start_safely(queued: QueuedJob, placed: list[list[Slot]]) -> bool:
    """Start one job; an unexpected error stops only this job's start, not the round."""
    try:
        return start_job(queued, placed) is not None
    except Exception as exc:
        log.exception("queue: starting %s failed", queued)
        lease.record_failure(ACTIVITY, f"starting '{queued}': {type(exc).__name__}: {exc}")
        return False


def start_job(queued: QueuedJob, placed: list[list[Slot]]) -> QueueRun | None:
    """Gang start: claim every GPU, then spawn every task; any failure undoes the start."""
    run = claim(queued, placed)
    if run is None:
        return None
    tasks = list(run.job.tasks.select_related("host", "job__owner"))
    try:
        for task in tasks:
            job_services.spawn_task(task, None)
    except (ValidationError, PermissionDenied) as exc:
        abort_start(run, tasks, job_services.error_text(exc))
        return None
    record("queue.start", target=queued, job=run.job_id, gpus=run.gpus)
    lease.enqueue("notifications", "queueing.scheduler.tell_started", run.pk, save=False)
    if not QueuedJob.objects.filter(pk=queued.pk, state=State.STARTING).update(
        state=State.RUNNING
    ):  # cancelled or preempted while its tasks were starting: stop those started since
        stop_running_tasks(run)
    return run


def tell_started(run_id: int) -> int:
    """Tell the owner where their queued job started (a worker task: webhooks may be slow)."""
    run = QueueRun.objects.select_related("queued_job__owner", "job").get(pk=run_id)
    queued = run.queued_job
    gpus = ", ".join(str(d) for t in run.job.tasks.all() for d in t.devices.all())
    waited = timezone.now() - queued.enqueued_at
    text = f"'{queued}' started on {gpus} after waiting {int(waited.total_seconds() // 60)} min."
    link = settings.PUBLIC_URL.rstrip("/") + reverse("job-detail", args=[run.job_id])
    subject = f"Your queued job '{queued}' started"
    return notify(
        queued.owner, "queued_started", f"queue-run-{run.pk}-started", subject, text, link
    )


def abort_start(run: QueueRun, tasks: list[Task], error: str) -> None:
    """Kill the tasks that did start, fail the rest, and put the job back (or fail it)."""
    for task in tasks:
        task.refresh_from_db()
        if task.status in (Task.Status.RUNNING, Task.Status.STOPPING):
            try:
                job_services.signal_task(task, None, "kill")
            except ValidationError as exc:
                lease.record_failure(ACTIVITY, f"killing task {task.pk}: {exc}")
    # Tasks never spawned would otherwise wait as "pending" forever on the jobs page.
    Task.objects.filter(pk__in=[t.pk for t in tasks], status=Task.Status.PENDING).update(
        status=Task.Status.FAILED,
        error="not started: another task of its queued job could not start",
        ended_at=timezone.now(),
    )
    QueueRun.objects.filter(pk=run.pk).update(outcome=Outcome.START_FAILED)
    queued = QueuedJob.objects.get(pk=run.queued_job_id)
    failures = queued.start_failures + 1
    gave_up = failures >= settings.QUEUE_MAX_START_FAILURES
    QueuedJob.objects.filter(pk=queued.pk).update(
        state=State.FAILED if gave_up else State.WAITING,
        start_failures=failures,
        reasons=[
            f"could not start ({failures} of {settings.QUEUE_MAX_START_FAILURES} tries): {error}"
        ],
    )
    lease.record_failure(ACTIVITY, f"starting '{queued}': {error}")
    close_if_ended(run)
