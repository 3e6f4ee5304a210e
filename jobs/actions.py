"""What requests ask of hosts, done by the workers: actions on tasks, their logs, free ports.

A request never reaches a host (core/hostcalls.py). For an action it checks and
claims as the services do (refusals answer at once and change nothing), marks the task
"starting" or "stopping", records a ``TaskAction`` and hands ``carry_out`` to the workers;
the page and the API show the task's state, which the workers move on. A host that refuses
is recorded on the action and on the task (``error``), where the owner and admins see it.

Logs are fetched by the workers after each sync round into ``TaskLog`` (the last
``JOBS_LOG_KEEP_BYTES`` of each, at most ``JOBS_LOG_FETCH_BYTES`` per task and round), and
pages serve that copy.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import lease, workers
from monitoring.models import Host

from . import remote, services
from .models import Task, TaskAction, TaskLog

log = logging.getLogger(__name__)
ACTIVITY = "jobs-actions"
LOGS_ACTIVITY = "jobs-logs"


# --- actions -------------------------------------------------------------------------------


def request(task: Task, user, action: str) -> Task:
    """Check and claim ``action`` on the task for ``user``, and hand it to the workers; the
    task acted on (for "spawn" on a task that failed or was stopped: its new run).

    Raises ValidationError or PermissionDenied (nothing changed) when it may not be done."""
    services.check_action(action)
    if action == "spawn" and task.status in Task.ENDED:
        return _request_rerun(task, user)
    before = task.status
    with transaction.atomic():
        if action == "spawn":
            services.claim_start(task, user)
        else:
            _claim_signal(task, user, action)
        order = TaskAction.objects.create(
            task=task, action=action, requested_by=user, status_before=before
        )
    if not lease.enqueue(ACTIVITY, "jobs.actions.carry_out", order.pk):
        _give_up(order, "the background workers cannot be reached (task broker down)")
        raise ValidationError(f"Task {task.pk}: the background workers cannot be reached now.")
    return task


def _request_rerun(task: Task, user) -> Task:
    """Run an ended task again (``services.rerun_task``), its start handed to the workers."""
    new = services.new_run(task, user)
    try:
        request(new, user, "spawn")
    except (ValidationError, PermissionDenied):
        services.forget_run(task, new)
        raise
    new.refresh_from_db()
    return new


def request_all(tasks, user, action: str) -> list[tuple[Task, str]]:
    """``request`` on each task the action applies to (``services.applicable``); per task,
    the task acted on (for a task run again, its new run) and "" or why not."""
    results = []
    for task in services.applicable(tasks, action):
        try:
            results.append((request(task, user, action), ""))
        except (ValidationError, PermissionDenied) as exc:
            results.append((task, services.error_text(exc)))
    return results


def _claim_signal(task: Task, user, action: str) -> None:
    signal = "terminate" if action == "stop" else action
    services.check_signal(task, user, signal)
    Task.objects.filter(pk=task.pk, status__in=Task.ACTIVE).update(
        status=Task.Status.STOPPING, error=""
    )


def carry_out(action_id: int) -> str:
    """The worker's side of ``request``: call the host, record how it went."""
    order = (
        TaskAction.objects.select_related("task__host", "task__job__owner", "requested_by")
        .filter(pk=action_id, done_at=None)
        .first()
    )
    if order is None:
        return f"action {action_id} is done or gone"
    if not TaskAction.objects.filter(pk=order.pk, begun_at=None).update(begun_at=timezone.now()):
        # Handed out again after its worker died mid-way: never twice (a start left half
        # done is settled by the sync from what the host shows).
        error = "the worker carrying it out stopped; ask again if nothing happened"
        TaskAction.objects.filter(pk=order.pk).update(done_at=timezone.now(), error=error)
        lease.record_failure(ACTIVITY, f"task {order.task_id}: {order}: {error}")
        return f"{order}: {error}"
    try:
        _carry_out(order)
    except (ValidationError, PermissionDenied) as exc:
        return _give_up(order, services.error_text(exc))
    except Exception as exc:  # unexpected: recorded where admins look, never silent
        log.exception("action %s on task %s failed", order.action, order.task_id)
        return _give_up(order, f"{type(exc).__name__}: {exc}")
    TaskAction.objects.filter(pk=order.pk).update(done_at=timezone.now())
    summary = f"{order} done"
    lease.record_success(ACTIVITY, summary)
    return summary


def _carry_out(order: TaskAction) -> None:
    task, user = order.task, order.requested_by
    if order.action == "spawn":
        # From now on the start's timeout counts (JOBS_START_TIMEOUT); a claim that waited
        # past it was settled by the sync (back to pending) and is not started here.
        now = timezone.now()
        if not Task.objects.filter(pk=task.pk, status=Task.Status.STARTING).update(started_at=now):
            raise ValidationError(f"Task {task.pk} is no longer waiting to start.")
        services.launch_claimed(task)
    elif order.action == "stop":
        services.stop_task(task, user)
    else:
        services.signal_task(task, user, order.action)


def _give_up(order: TaskAction, error: str) -> str:
    """Record why the action failed, on it and on its task; a signal that was not sent
    leaves the task as it was (a start that failed has failed the task already)."""
    TaskAction.objects.filter(pk=order.pk).update(done_at=timezone.now(), error=error)
    task = Task.objects.filter(pk=order.task_id)
    if order.action == "spawn":
        task.filter(status=Task.Status.STARTING).update(
            status=Task.Status.FAILED, error=error, ended_at=timezone.now()
        )
    else:
        # Only if no stop reached it meanwhile (stop_requested_at is set once one did).
        task.filter(status=Task.Status.STOPPING, stop_requested_at=None).update(
            status=order.status_before
        )
        task.update(error=f"{order.get_action_display()} failed: {error}")
    lease.record_failure(ACTIVITY, f"task {order.task_id}: {error}")
    return f"{order} failed: {error}"


def open_actions(task_ids) -> dict[int, str]:
    """Task id -> the action the workers have yet to carry out on it (the latest)."""
    rows = TaskAction.objects.filter(task_id__in=task_ids, done_at=None).order_by("requested_at")
    return dict(rows.values_list("task_id", "action"))


# --- logs ----------------------------------------------------------------------------------


def tasks_with_logs_to_fetch(host_ids=None):
    """Running tasks, and ended ones whose log was not fetched whole yet (an hour at most:
    a host that stays down does not keep them in every round)."""
    recent = timezone.now() - timedelta(hours=1)
    wanted = Q(status__in=[Task.Status.RUNNING, Task.Status.STOPPING]) | Q(
        status__in=Task.ENDED, ended_at__gte=recent
    )
    tasks = Task.objects.filter(wanted).exclude(log_path="").exclude(stored_log__complete=True)
    # A host that does not answer is not asked each round: its logs come when it is back.
    tasks = tasks.exclude(host__status=Host.Status.UNREACHABLE)
    if host_ids is not None:
        tasks = tasks.filter(host_id__in=host_ids)
    return tasks.select_related("host", "stored_log")


def logs_wanted(host_ids) -> bool:
    """Whether a cycle over these hosts leaves logs to fetch (a cheap query)."""
    return tasks_with_logs_to_fetch(host_ids).exists()


def fetch_logs(host_ids=None) -> str:
    """Bring the new part of each log to the database: one call per host and account. Each
    host is on its own: one that fails is recorded (on its tasks' logs and, by name, where
    admins look), and the others' logs are fetched all the same."""
    groups: dict[tuple[int, str], list[Task]] = {}
    for task in tasks_with_logs_to_fetch(host_ids):
        groups.setdefault((task.host_id, task.unix_username), []).append(task)
    fetched, failures = 0, []
    for (_, username), group in groups.items():
        try:
            fetched += _fetch_group(group, username)
        except Exception as exc:  # one host's trouble: recorded, the others go on
            if not isinstance(exc, remote.RemoteError):
                log.exception("fetching the logs on %s failed", group[0].host)
            error = services.host_error(group[0].host, exc)
            failures.append(error)
            TaskLog.objects.filter(task__in=group).update(error=error)
    if failures:
        lease.record_failure(LOGS_ACTIVITY, "; ".join(failures))
    summary = f"{fetched} logs fetched"
    if failed := len(failures):
        summary += f", {failed} {'host' if failed == 1 else 'hosts'} could not be asked"
    lease.record_success(LOGS_ACTIVITY, summary)
    return summary


def _fetch_group(group: list[Task], username: str) -> int:
    """The logs of one host's tasks run as one account: one SSH call."""
    stored = [_stored(task) for task in group]
    wanted = [(t.log_path, s.end) for t, s in zip(group, stored, strict=True)]
    pieces = remote.read_logs(
        group[0].host, username, wanted, settings.JOBS_LOG_KEEP_BYTES,
        settings.JOBS_LOG_FETCH_BYTES,
    )  # fmt: skip
    return sum(_store(t, s, p) for t, s, p in zip(group, stored, pieces, strict=True))


def _stored(task: Task) -> TaskLog:
    try:
        return task.stored_log
    except TaskLog.DoesNotExist:
        return TaskLog.objects.get_or_create(task=task)[0]


def _store(task: Task, log_copy: TaskLog, piece: remote.LogPiece | None) -> int:
    """Append (or, after a jump, replace with) the piece; keep the last KEEP bytes."""
    if piece is None:  # no log file (yet): nothing to keep
        return 0
    text = bytes(log_copy.text)
    if piece.start == log_copy.end:
        text += piece.data
        start = log_copy.start
    else:  # the log was rewritten (a retried start), or moved past what is kept
        text, start = piece.data, piece.start
    excess = len(text) - settings.JOBS_LOG_KEEP_BYTES
    if excess > 0:
        text, start = text[excess:], start + excess
    complete = task.status in Task.ENDED and start + len(text) >= piece.size
    TaskLog.objects.filter(pk=log_copy.pk).update(
        start=start, text=text, fetched_at=timezone.now(), complete=complete, error=""
    )
    return 1


def log_piece(task: Task, offset: int = 0, limit: int | None = None) -> dict:
    """A piece of the task's log as last fetched: {"size", "offset", "next_offset", "text",
    "complete"}; ``size`` is how far the fetched log goes, the offsets are bytes of the log
    on the host, ``complete`` says the task had ended when it was fetched (nothing more will
    come); empty while the task is starting."""
    if not task.log_path and task.status != Task.Status.STARTING:
        raise ValidationError("The task has not started: it has no log yet.")
    limit = limit or settings.JOBS_LOG_CHUNK_BYTES
    stored = TaskLog.objects.filter(task=task).first() or TaskLog(task=task)
    data, start = bytes(stored.text), stored.start
    offset = min(max(offset, start), stored.end)
    chunk = data[offset - start : offset - start + limit]
    return {
        "size": stored.end,
        "offset": offset,
        "next_offset": offset + len(chunk),
        "text": chunk.decode(errors="replace"),
        "complete": stored.complete,
    }


def log_file(task: Task) -> bytes:
    """The kept log for a download; a first line says so when its beginning was dropped."""
    if not task.log_path:
        raise ValidationError("The task has not started: it has no log yet.")
    stored = TaskLog.objects.filter(task=task).first() or TaskLog(task=task)
    if stored.start == 0:
        return bytes(stored.text)
    note = (
        f"[the first {stored.start} bytes are not kept by the service; the whole log is "
        f"{task.log_path} on {task.host}]\n"
    )
    return note.encode() + bytes(stored.text)


# --- questions for the hosts ---------------------------------------------------------------


def free_port(host_id: int, username: str) -> dict:
    """A port free on the host now, as ``core.workers`` answers (run by a worker)."""
    host = Host.objects.filter(pk=host_id).first()
    if host is None:
        return workers.refusal(f"host {host_id} no longer exists")
    try:
        return workers.answer(remote.free_port(host, username))
    except remote.RemoteError as exc:
        return workers.refusal(str(exc))
