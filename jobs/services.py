"""Operations on jobs and tasks, as plain functions for pages, API and workers.

``check_*`` validate and authorise (raising ValidationError or PermissionDenied, changing
nothing); ``create_*``/``spawn_*``/``signal_*`` change state. SSH calls never run inside a
database transaction: a task is claimed with a conditional UPDATE first (exactly one caller
wins), the host is called, then the outcome is written.
"""

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Case, Value, When, prefetch_related_objects
from django.utils import timezone

from accesscontrol.accounts import RunAs, account_for, spawn_min_uid
from accesscontrol.permissions import can
from allocation.rule import Processes, start_rule
from audit.log import record
from core import lease
from monitoring.models import Device, Host, cuda_devices
from reservations.models import Reservation

from . import remote, templating
from .models import Job, Task

log = logging.getLogger(__name__)
SIGNALS = {"interrupt": "INT", "terminate": "TERM", "kill": "KILL"}
# Who asks for a start or a stop: a user, or None for the service (scheduler, workers).
Asker = User | None


@dataclass
class TaskSpec:
    """What a new task needs; ``parameters`` fill the template's fields."""

    host: Host
    template: str
    parameters: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    devices: list[Device] = field(default_factory=list)
    scheduled_start: datetime | None = None
    scheduled_stop: datetime | None = None
    reservation: Reservation | None = None


# --- creating ------------------------------------------------------------------------------


def check_spec(owner: User, spec: TaskSpec) -> None:
    for device in spec.devices:
        if device.host_id != spec.host.pk:
            raise ValidationError(f"GPU {device} is not on host {spec.host}.")
    start, stop = spec.scheduled_start, spec.scheduled_stop
    if start and stop and stop <= start:
        raise ValidationError("The scheduled stop must come after the scheduled start.")
    if spec.reservation is not None:
        check_reservation(owner, spec.reservation, spec.devices)


def check_reservation(owner: User, reservation: Reservation, devices: list[Device]) -> None:
    if reservation.owner_id != owner.pk:
        raise ValidationError("A task can only be attached to a reservation of its owner.")
    if not reservation.holds_devices:
        raise ValidationError(f"The reservation {reservation} is cancelled.")
    booked = set(reservation.devices.values_list("pk", flat=True))
    # A booked GPU holds its MIG slices: work may run on any of them.
    if any(d.pk not in booked and d.parent_id not in booked for d in devices):
        raise ValidationError(f"The reservation {reservation} does not book all the task's GPUs.")


def command_of(spec: TaskSpec) -> str:
    """The command a task of this spec runs: what is stored, and what the preview shows."""
    return templating.render(spec.template, spec.parameters)


def preview(specs: list[TaskSpec], shown: int = 20) -> dict[str, object]:
    """How many tasks the specs make and the first ``shown`` of their command lines, as the
    job page will show them, without saving anything."""
    commands = [
        templating.command_line(templating.check_env(spec.env), command_of(spec))
        for spec in specs[:shown]
    ]
    return {"count": len(specs), "commands": commands}


def _new_task(job: Job, spec: TaskSpec) -> Task:
    env = templating.check_env(spec.env)
    start, stop = spec.scheduled_start, spec.scheduled_stop
    if spec.reservation is not None:  # start and stop with the reservation unless told
        start = start or max(spec.reservation.start, timezone.now())
        stop = stop or spec.reservation.end
    task = Task.objects.create(
        job=job,
        host=spec.host,
        template=spec.template,
        parameters={k: str(v) for k, v in spec.parameters.items()},
        env=env,
        command=command_of(spec),
        scheduled_start=start,
        scheduled_stop=stop,
        reservation=spec.reservation,
    )
    task.devices.add(*spec.devices)  # a new task: nothing to compare with, as set() would
    return task


def follow_reservation(reservation: Reservation, old_start: datetime, old_end: datetime) -> None:
    """Tasks attached to a reservation start and stop with it: when it moves or ends early,
    the times they took from it move too (times their owner set apart stay); when it is
    cancelled, their pending tasks will not start."""
    attached = Task.objects.filter(reservation=reservation)
    if not reservation.holds_devices:
        attached.filter(status=Task.Status.PENDING).update(
            status=Task.Status.FAILED,
            error=f"not started: its reservation {reservation} was cancelled",
            ended_at=timezone.now(),
        )
        return
    if reservation.end != old_end:
        waiting_or_running = [Task.Status.PENDING, Task.Status.RUNNING]
        attached.filter(status__in=waiting_or_running, scheduled_stop=old_end).update(
            scheduled_stop=reservation.end
        )
    if reservation.start != old_start:
        attached.filter(status=Task.Status.PENDING, scheduled_start=old_start).update(
            scheduled_start=reservation.start
        )


def check_unfinished_cap(owner: User, adding: int) -> None:
    """One user's unfinished tasks in jobs stay under JOBS_MAX_UNFINISHED_TASKS_PER_USER, so
    one person's thousands of tasks cannot slow every sync and start for everybody.

    Not locked against a racing request of the same user: a cap on load, not an invariant.
    """
    cap = settings.JOBS_MAX_UNFINISHED_TASKS_PER_USER
    unfinished = Task.objects.filter(job__owner=owner).exclude(status__in=Task.ENDED).count()
    if unfinished + adding > cap:
        raise ValidationError(
            f"This would give you {unfinished + adding} unfinished tasks in jobs; at most "
            f"{cap} are allowed per user (the cap on unfinished job tasks). You have "
            f"{unfinished}: wait for some to end, or stop those you no longer need."
        )


@transaction.atomic
def add_task(job: Job, spec: TaskSpec) -> Task:
    """One more pending task in an existing job, checked as ``create_job`` checks its own."""
    check_spec(job.owner, spec)
    check_unfinished_cap(job.owner, 1)
    return _new_task(job, spec)


@transaction.atomic
def create_job(
    owner: User,
    *,
    name: str,
    specs: list[TaskSpec],
    description: str = "",
    template: str = "",
    capped: bool = True,
) -> Job:
    """A job with one task per spec; all or nothing. ``capped=False`` is for the queue's
    starts only: those tasks were counted against the queue's own cap when they were queued.
    """
    if not name.strip():
        raise ValidationError("A job needs a name.")
    if not specs:
        raise ValidationError("A job needs at least one task.")
    if len(specs) > settings.JOBS_MAX_TASKS:  # the pages' forms and commands come here too
        raise ValidationError(f"A job has at most {settings.JOBS_MAX_TASKS} tasks.")
    if capped:
        check_unfinished_cap(owner, len(specs))
    for spec in specs:
        check_spec(owner, spec)
    job = Job.objects.create(owner=owner, name=name, description=description, template=template)
    for spec in specs:
        _new_task(job, spec)
    record("job.create", actor=owner, target=job, tasks=len(specs))
    return job


def grid_specs(
    data: dict[str, Any],
    scheduled_start: datetime | None = None,
    scheduled_stop: datetime | None = None,
) -> list[TaskSpec]:
    """One spec per combination of a grid's value lists (all, or ``samples`` of them drawn
    with ``seed``), from the cleaned data of the grid form or of the API's grid."""
    combos = templating.grid(data["values"], data.get("samples"), data.get("seed"))
    return [
        TaskSpec(
            host=data["host"],
            template=data["template"],
            parameters=combo,
            env=data["env"],
            devices=list(data["devices"]),
            scheduled_start=scheduled_start,
            scheduled_stop=scheduled_stop,
        )
        for combo in combos
    ]


def spec_of(task: Task) -> TaskSpec:
    """A task's spec again (scheduled times are not copied: they have passed)."""
    return TaskSpec(
        host=task.host,
        template=task.template,
        parameters=task.parameters,
        env=task.env,
        devices=list(task.devices.all()),
    )


def duplicate_job(job: Job, user: User) -> Job:
    """A new pending copy of a job, owned by whoever duplicates it (so it runs as them)."""
    specs = [spec_of(t) for t in job.tasks.select_related("host").prefetch_related("devices")]
    return create_job(
        user,
        name=f"{job.name} (copy)",
        specs=specs,
        description=job.description,
        template=job.template,
    )


# --- starting ------------------------------------------------------------------------------


def check_may_run(user: Asker, task: Task) -> None:
    """Only the owner starts a task (it runs as their account); admins cannot run as others."""
    if user is not None and user.pk != task.job.owner_id:
        raise PermissionDenied("Only the job's owner can start its tasks: they run as the owner.")


def check_can_start(task: Task, now: datetime, processes: Processes | None = None) -> RunAs | None:
    """The start rule (allocation.rule) allows the owner on every GPU of the task,
    over its run (until its scheduled stop, else the reservation horizon); every reason
    is said. ``processes``: what nvidia-smi showed just now, per host id, if asked.
    Returns the UNIX account the rule found for the owner on the task's host, with its UID
    floor (None for a task without GPUs: the rule did not look)."""
    devices = list(task.devices.all())  # the rule reads them again, with their hosts
    reasons, rule = start_rule(
        task.job.owner, devices, now, task.scheduled_stop, job=task.job, processes=processes
    )
    if reasons:
        raise ValidationError([r.text for r in reasons], code=reasons[0].code)
    if task.reservation is not None:
        check_reservation(task.job.owner, task.reservation, devices)
    return rule.account(task.job.owner, task.host)


def task_env(task: Task) -> dict[str, str]:
    """The task's environment, with its GPUs (in nvidia-smi's PCI bus order, by UUID; a MIG
    slice by its MIG UUID)."""
    # Sorted there, not by the database, so pages that prefetch the devices ask nothing more.
    uuids = cuda_devices(task.devices.all())
    gpu_env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(uuids)}
    return {**gpu_env, **task.env}


def planned_argv(task: Task) -> list[str]:
    """The argv that starting this task sends to its host (shown on the task's page)."""
    return remote.spawn_argv(task.session_name, task.command, task_env(task))


def spawn_task(task: Task, user: Asker, processes: Processes | None = None) -> Task:
    """Start a pending task in a detached screen session on its host, as the owner.

    ``user`` is who asks (None for the scheduler); refusals raise and change nothing.
    ``processes``: as for check_can_start.
    """
    return launch_claimed(task, claimed_as=claim_start(task, user, processes))


def claim_start(task: Task, user: Asker, processes: Processes | None = None) -> RunAs:
    """The checks of a start, then the task marked "starting" (exactly one caller wins) and
    audited; no host is called, so a request may do this and leave the launch to a worker.
    Returns the account it runs as (for ``launch_claimed`` in this process)."""
    check_may_run(user, task)
    if task.status != Task.Status.PENDING:
        raise ValidationError(
            f"Task {task.pk} is {task.get_status_display().lower()}, not pending."
        )
    now = timezone.now()
    prefetch_related_objects([task], "devices")  # read once for the checks, argv and audit
    account = check_can_start(task, now, processes) or account_for(task.job.owner, task.host)
    username = account.name
    argv = planned_argv(task)
    claimed = Task.objects.filter(pk=task.pk, status=Task.Status.PENDING).update(
        status=Task.Status.STARTING,
        unix_username=username,
        argv=argv,
        error="",
        screen_session=task.session_name,
        started_at=now,  # when the start was claimed: a start older than the timeout died
    )
    if not claimed:
        raise ValidationError(f"Task {task.pk} was started by someone else just now.")
    task.status, task.unix_username, task.argv = Task.Status.STARTING, username, argv
    task.error, task.screen_session, task.started_at = "", task.session_name, now
    record(
        "job.run_as",
        actor=user,
        target=task,
        unix_user=username,
        host=task.host.name,
        command=task.command,
        # Names only: values may be tokens (WANDB_API_KEY=...), and the audit is kept longest.
        env_names=sorted(task_env(task)),
    )
    return account


def launch_claimed(task: Task, claimed_as: RunAs | None = None) -> Task:
    """Start the screen session of a task claimed by ``claim_start``, as the argv it stored.
    ``claimed_as``: what claim_start returned, when the caller claimed it just now in this
    process; without it the task is read again and its account's UID floor asked again."""
    if claimed_as is None:
        task.refresh_from_db()
    try:
        # The UID floor is checked on the host itself (accesscontrol.accounts).
        min_uid = (
            claimed_as.min_uid
            if claimed_as is not None
            else spawn_min_uid(task.unix_username, task.host)
        )
        spawned = remote.spawn(task.host, task.unix_username, task.argv, min_uid=min_uid)
    except remote.RemoteError as exc:
        _finish(task, Task.Status.FAILED, error=str(exc))
        raise ValidationError(f"Task {task.pk} could not start: {exc}") from None
    running = Task.objects.filter(pk=task.pk, status=Task.Status.STARTING).update(
        status=Task.Status.RUNNING,
        pid=spawned.pid,
        log_path=spawned.log_path,
        started_at=task.started_at,
    )
    if running:
        task.status, task.pid, task.log_path = Task.Status.RUNNING, spawned.pid, spawned.log_path
    else:  # changed meanwhile (a stop, a recovery): as the database has it
        task.refresh_from_db()
    return task


def rerun_task(task: Task, user: Asker) -> Task:
    """Run an ended task that did not succeed again: a new task of the same job with the same
    command, GPUs and environment, started now as the owner. The old one keeps its status,
    exit code and log, and points to the new run; a refused start leaves nothing behind."""
    new = new_run(task, user)
    try:
        spawn_task(new, user)
    except (ValidationError, PermissionDenied):
        forget_run(task, new)
        raise
    new.refresh_from_db()
    return new


def new_run(task: Task, user: Asker) -> Task:
    """The checks of running ``task`` again, then its new run (pending, not started): the
    first half of ``rerun_task``, for callers that start it their own way."""
    check_may_run(user, task)
    if not task.may_rerun:
        again = f": it was run again as task {task.rerun_as_id}" if task.rerun_as_id else ""
        raise ValidationError(
            f"Task {task.pk} is {task.get_status_display().lower()}{again}; only a failed or "
            "stopped task, or one that exited with an error, can be run again."
        )
    check_unfinished_cap(task.job.owner, 1)
    with transaction.atomic():
        new = _new_task(task.job, spec_of(task))
        if not Task.objects.filter(pk=task.pk, rerun_as=None).update(rerun_as=new):
            raise ValidationError(f"Task {task.pk} was run again by someone else just now.")
    return new


def forget_run(task: Task, new: Task) -> None:
    """A new run whose start was refused: gone, as if it had not been asked (the old run may
    be run again)."""
    if Task.objects.filter(pk=new.pk, status=Task.Status.PENDING).delete()[0]:
        Task.objects.filter(pk=task.pk).update(rerun_as=None)


def _finish(task: Task, status: str | Case, **fields: object) -> bool:
    """Mark an active task ended; False if it had already ended (someone else saw it first)."""
    fields.setdefault("ended_at", timezone.now())
    done = Task.objects.filter(pk=task.pk, status__in=Task.ACTIVE).update(status=status, **fields)
    if done and not task.job.tasks.exclude(status__in=Task.ENDED).exists():
        # The job's last task ended: its owner is told by a worker (webhooks may be slow).
        lease.enqueue("notifications", "jobs.tasks.tell_job_ended", task.job_id, save=False)
    return done == 1


# --- stopping ------------------------------------------------------------------------------


def check_may_stop(user: Asker, task: Task) -> None:
    """The owner and admins may stop a task; the signal is sent as the owner's account."""
    if user is not None and not can(user, "change", task):
        raise PermissionDenied("Only the job's owner or an admin can stop its tasks.")


def check_signal(task: Task, user: Asker, action: str) -> int:
    """Whether ``user`` may send the signal of ``action`` to the task now (host not asked);
    the process to send it to."""
    if action not in SIGNALS:
        raise ValidationError(f"Unknown action {action!r}: use one of {', '.join(SIGNALS)}.")
    check_may_stop(user, task)
    if task.status not in (Task.Status.RUNNING, Task.Status.STOPPING) or not task.pid:
        raise ValidationError(
            f"Task {task.pk} is {task.get_status_display().lower()}: nothing to stop."
        )
    return task.pid


def signal_task(task: Task, user: Asker, action: str, kill_after: float | None = None) -> Task:
    """Send SIGINT/SIGTERM/SIGKILL (action interrupt/terminate/kill) to the task's processes.

    ``kill_after``: seconds after which the workers send SIGKILL if it still runs.
    """
    pid = check_signal(task, user, action)
    try:
        remote.send_signal(task.host, task.unix_username, SIGNALS[action], [pid])
    except remote.RemoteError as exc:
        raise ValidationError(str(exc)) from None
    now = timezone.now()
    kill_at = now + timedelta(seconds=kill_after) if kill_after is not None else None
    Task.objects.filter(pk=task.pk, status__in=Task.ACTIVE).update(
        status=Task.Status.STOPPING,
        stop_requested_at=now,
        **({"kill_at": kill_at} if kill_at else {}),
    )
    record(
        f"job.{action}",
        actor=user,
        target=task,
        unix_user=task.unix_username,
        host=task.host.name,
        pid=task.pid,
    )
    task.refresh_from_db()
    return task


def stop_task(task: Task, user: Asker) -> Task:
    """Graceful stop: SIGTERM now, SIGKILL after JOBS_STOP_GRACE_SECONDS if still running."""
    return signal_task(task, user, "terminate", kill_after=settings.JOBS_STOP_GRACE_SECONDS)


# --- synchronising -------------------------------------------------------------------------


@dataclass
class SyncOutcome:
    """What one sync found: how many tasks ended, and each host and account it could not
    ask (their tasks stay as they were; the next sync asks again)."""

    ended: int = 0
    failures: list[Exception] = field(default_factory=list)


def sync_by_host(tasks: list[Task]) -> SyncOutcome:
    """Find out which of these active tasks ended; one SSH call per host and account.

    Reads only what is on the host (screen sessions and exit files), so a restarted service
    picks up where it left off. Each host is on its own: one that cannot be asked (or whose
    answer cannot be recorded) is a failure in the outcome, and the others are synced.
    """
    groups: dict[tuple[int, str], list[Task]] = {}
    for task in tasks:
        groups.setdefault((task.host_id, task.unix_username), []).append(task)
    outcome = SyncOutcome()
    for (_, username), group in groups.items():
        try:
            states = remote.session_states(group[0].host, username, [t.session_name for t in group])
            outcome.ended += sum(record_end(t, states[t.session_name]) for t in group)
        except Exception as exc:  # that host's trouble (or a bug with its answer) only
            if not isinstance(exc, remote.RemoteError):
                log.exception("syncing the tasks on %s failed", group[0].host)
            outcome.failures.append(remote.RemoteError(host_error(group[0].host, exc)))
    return outcome


def host_error(host: Host, exc: Exception) -> str:
    """One line naming the host, for a failure among several hosts'."""
    text = str(exc) if isinstance(exc, remote.RemoteError) else repr(exc)
    return text if text.startswith(f"{host.name}:") else f"{host.name}: {text}"


def sync_tasks(tasks: list[Task]) -> int:
    """``sync_by_host``, for callers that watch one task: returns how many tasks ended, and
    raises RemoteError for the first host that could not be asked, after doing the others."""
    outcome = sync_by_host(tasks)
    if outcome.failures:
        raise outcome.failures[0]
    return outcome.ended


def on_reachable_hosts(tasks: list[Task]) -> tuple[list[Task], list[Task]]:
    """(the tasks whose host answers, as far as the probing loop knows; the others). The
    others wait for their host without an SSH call each round: the loop says when it is
    back, and the next sync finds whether they still run or how they ended."""
    waiting = [t for t in tasks if t.host_unreachable_since is not None]
    return [t for t in tasks if t.host_unreachable_since is None], waiting


def waiting_summary(waiting: list[Task]) -> str:
    """E.g. "; 2 tasks wait for unreachable hosts (node-7, node-9)" for a sync's summary."""
    if not waiting:
        return ""
    hosts = sorted({t.host.name for t in waiting})
    noun = "task waits" if len(waiting) == 1 else "tasks wait"
    where = "host" if len(hosts) == 1 else "hosts"
    return f"; {len(waiting)} {noun} for unreachable {where} ({', '.join(hosts)})"


def await_end(
    task: Task, seconds: float, then: Sequence[str] = ()
) -> tuple[remote.SessionState | None, str | None]:
    """Wait on the host (up to ``seconds``) for the task to end, and tell it without recording
    it (``record_end`` does, when the caller has done what is more urgent): (its state, or
    None if it had not ended: only a sync tells whether its session died without an exit
    code; the output of ``then`` run on the host right after the end, or None)."""
    state, then_out = remote.wait_for_exit(
        task.host, task.unix_username, task.session_name, seconds, then
    )
    if state is not None and state.ended_at is None:  # it ended during the wait: just now
        state.ended_at = timezone.now()
    return state, then_out


def record_end(task: Task, state: remote.SessionState) -> bool:
    """Record what the host told of an active task (``state``); True if that ended it now."""
    if state.exit_code is not None:
        # Decided from the row at update time, not from what this sync read before its SSH
        # call: a stop requested meanwhile still makes the task "killed", not "exited 143".
        status = Case(
            When(stop_requested_at__isnull=False, then=Value(Task.Status.KILLED)),
            default=Value(Task.Status.EXITED),
        )
        return _finish(
            task, status, exit_code=state.exit_code, ended_at=state.ended_at or timezone.now()
        )
    if not state.alive:
        return _finish(
            task,
            Task.Status.FAILED,
            error="the screen session ended without an exit code "
            "(the host restarted, or the session was killed)",
        )
    return False


def interrupted_starts(host_ids: Iterable[int] | None = None) -> list[Task]:
    """Tasks "starting" for longer than JOBS_START_TIMEOUT: whoever started them died (a
    worker killed mid-start; django-q ends any task before that), between claiming the task
    and recording its screen session."""
    cutoff = timezone.now() - timedelta(seconds=settings.JOBS_START_TIMEOUT)
    tasks = Task.objects.filter(status=Task.Status.STARTING, started_at__lt=cutoff)
    if host_ids is not None:
        tasks = tasks.filter(host_id__in=host_ids)
    return list(tasks.select_related("host"))


def recover_start(task: Task) -> str:
    """Settle an interrupted start from what the host shows: a screen window that started
    is adopted ("running"; the sync that follows finds whether it still runs); a task that
    never started goes back to "pending", so its schedule or its queue starts it again.
    Never twice: the host refuses a second session of the same name. Returns what it did."""
    pid, log_path = remote.started(task.host, task.unix_username, task.session_name)
    interrupted = Task.objects.filter(pk=task.pk, status=Task.Status.STARTING)
    if pid is not None:
        interrupted.update(status=Task.Status.RUNNING, pid=pid, log_path=log_path)
        return "adopted"
    interrupted.update(
        status=Task.Status.PENDING,
        started_at=None,
        error="its start was interrupted before the program started (the process starting "
        "it stopped); it has not run",
    )
    return "retried"


def tasks_to_sync(host_ids: Iterable[int] | None = None) -> list[Task]:
    tasks = Task.objects.filter(status__in=[Task.Status.RUNNING, Task.Status.STOPPING])
    if host_ids is not None:
        tasks = tasks.filter(host_id__in=host_ids)
    return list(tasks.select_related("host"))


# --- group actions -------------------------------------------------------------------------


def _applies(task: Task, action: str) -> bool:
    if action == "spawn":
        return task.status == Task.Status.PENDING or task.may_rerun
    return task.status in (Task.Status.RUNNING, Task.Status.STOPPING)


def error_text(exc: Exception) -> str:
    """A ValidationError's (or PermissionDenied's) messages as one sentence for people."""
    return " ".join(getattr(exc, "messages", [str(exc)]))


ACTIONS = ("spawn", "interrupt", "terminate", "kill", "stop")


def act(task: Task, user: Asker, action: str) -> Task:
    """One action on one task, by ``user`` (spawn runs as the owner, whoever asks; spawning
    a task that failed or was stopped runs it again as a new task)."""
    if action == "spawn":
        return rerun_task(task, user) if task.status in Task.ENDED else spawn_task(task, user)
    if action == "stop":
        return stop_task(task, user)
    return signal_task(task, user, action)


def applicable(tasks: Iterable[Task], action: str) -> list[Task]:
    """The tasks ``action`` applies to: a group action means "those of these that can", so
    tasks in a state it does not apply to (e.g. "kill" on a finished task) are left out."""
    check_action(action)
    return [task for task in tasks if _applies(task, action)]


def check_action(action: str) -> None:
    if action not in ACTIONS:
        raise ValidationError(f"Unknown action {action!r}: use one of {', '.join(ACTIONS)}.")
