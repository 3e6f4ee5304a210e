"""Background work of jobs, run by the django-q2 workers. Arguments are IDs, never instances.

``after_cycle`` is enqueued after a monitoring cycle (every MONITORING_INTERVAL seconds) when
hosts of that cycle have active tasks or a scheduled start/stop/kill is due (see
receivers.py): the probing loop, watched by its own schedule, is the clock.
"""

import logging
import os
import socket

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from monitoring import lease
from notifications.send import notify

from . import actions, services
from .models import Job, Task

log = logging.getLogger(__name__)
SYNC_ACTIVITY = "jobs-sync"
SCHEDULE_ACTIVITY = "jobs-schedule"
# One sync at a time cluster-wide; a sync that found the lease taken just returns.
LEASE_SECONDS = 120


def after_cycle(host_ids=None) -> str:
    holder = f"{socket.gethostname()}:{os.getpid()}"
    if not lease.acquire(SYNC_ACTIVITY, holder, LEASE_SECONDS):
        return "another sync is running"
    try:
        return f"{sync_running(host_ids)}; {run_due_actions()}"
    finally:
        lease.release(SYNC_ACTIVITY, holder)


def sync_running(host_ids=None) -> str:
    """Update running and stopping tasks from their hosts; failures go to the admin."""
    settled = recover_starts(host_ids)
    tasks = services.tasks_to_sync(host_ids)
    try:
        ended = services.sync_tasks(tasks)
    except Exception as exc:  # recorded where admins look; the next cycle tries again
        lease.record_failure(SYNC_ACTIVITY, exc)
        return f"sync failed: {exc}"
    summary = f"{len(tasks)} active tasks checked, {ended} ended{settled}"
    lease.record_success(SYNC_ACTIVITY, summary)
    return f"{summary}; {fetch_logs(host_ids)}"


def fetch_logs(host_ids=None) -> str:
    """The logs' new parts, after the sync (so a task seen ended has its whole log)."""
    try:
        return actions.fetch_logs(host_ids)
    except Exception as exc:  # recorded where admins look; the next round tries again
        log.exception("fetching logs failed")
        lease.record_failure(actions.LOGS_ACTIVITY, exc)
        return f"fetching logs failed: {exc}"


def recover_starts(host_ids=None) -> str:
    """Settle starts interrupted by a dying worker (see services.recover_start); returns
    e.g. "; interrupted starts: task 4 adopted, task 5 retried" for the sync's summary."""
    done = []
    for task in services.interrupted_starts(host_ids):
        try:
            done.append(f"task {task.pk} {services.recover_start(task)}")
        except Exception as exc:  # recorded; the others are settled, the next cycle retries
            log.exception("settling the interrupted start of task %s failed", task.pk)
            lease.record_failure(SYNC_ACTIVITY, f"interrupted start of task {task.pk}: {exc!r}")
    return f"; interrupted starts: {', '.join(done)}" if done else ""


def due_tasks(now):
    starts = Task.objects.filter(status=Task.Status.PENDING, scheduled_start__lte=now)
    stops = Task.objects.filter(
        status=Task.Status.RUNNING, scheduled_stop__lte=now, stop_requested_at__isnull=True
    )
    kills = Task.objects.filter(status=Task.Status.STOPPING, kill_at__lte=now)
    return starts, stops, kills


def has_due_work(now=None) -> bool:
    now = now or timezone.now()
    return any(q.exists() for q in due_tasks(now))


def run_due_actions(now=None) -> str:
    """Start, stop (SIGTERM) and kill (after the grace period) the tasks whose time came."""
    now = now or timezone.now()
    starts, stops, kills = (q.select_related("job__owner", "host") for q in due_tasks(now))
    done = failed = 0
    for task, act in [
        *((t, _scheduled_start) for t in starts),
        *((t, lambda t: services.stop_task(t, None)) for t in stops),
        *((t, _kill_after_grace) for t in kills),
    ]:
        try:
            act(task)
            done += 1
        except (ValidationError, PermissionDenied, services.remote.RemoteError) as exc:
            failed += 1
            lease.record_failure(SCHEDULE_ACTIVITY, f"task {task.pk}: {services.error_text(exc)}")
        except Exception as exc:  # unexpected: recorded, and the other tasks' actions still run
            failed += 1
            log.exception("scheduled action on task %s failed", task.pk)
            lease.record_failure(SCHEDULE_ACTIVITY, f"task {task.pk}: {exc!r}")
    summary = f"{done} scheduled actions done, {failed} failed"
    if done or not failed:
        lease.record_success(SCHEDULE_ACTIVITY, summary)
    return summary


def _scheduled_start(task: Task) -> None:
    """Start at its time; a start that is refused fails the task (with why) instead of
    being retried every cycle."""
    if task.scheduled_stop and task.scheduled_stop <= timezone.now():
        reason = "its scheduled stop passed before it could start"
        _fail_pending(task, reason)
        raise ValidationError(reason)
    try:
        services.spawn_task(task, None)
    except ValidationError as exc:
        _fail_pending(task, services.error_text(exc))
        raise


def _fail_pending(task: Task, reason: str) -> None:
    Task.objects.filter(pk=task.pk, status=Task.Status.PENDING).update(
        status=Task.Status.FAILED,
        error=f"scheduled start refused: {reason}",
        ended_at=timezone.now(),
    )


def _kill_after_grace(task: Task) -> None:
    # Cleared first, so a failing kill is not retried every cycle forever.
    Task.objects.filter(pk=task.pk).update(kill_at=None)
    services.signal_task(task, None, "kill")


def pending_sync_wanted(host_ids) -> bool:
    """Whether a cycle over these hosts needs the workers at all (cheap queries only)."""
    active = Q(status__in=Task.ACTIVE, host_id__in=host_ids)  # "starting": maybe interrupted
    return Task.objects.filter(active).exists() or has_due_work() or actions.logs_wanted(host_ids)


def tell_job_ended(job_id: int) -> int:
    """Tell the owner that a job ended, with each task's outcome (once per job)."""
    job = Job.objects.select_related("owner").get(pk=job_id)
    tasks = list(job.tasks.select_related("host"))
    if any(t.status not in Task.ENDED for t in tasks):
        return 0  # a task was added or restarted meanwhile: not over
    lines = [f"task {t.pk} on {t.host}: {outcome(t)}" for t in tasks]
    link = settings.PUBLIC_URL.rstrip("/") + reverse("job-detail", args=[job.pk])
    subject = f"Your job '{job.name}' ended: {job.status}"
    return notify(job.owner, "job_ended", f"job-{job.pk}-ended", subject, "\n".join(lines), link)


def outcome(task: Task) -> str:
    if task.status == Task.Status.EXITED:
        return f"exit code {task.exit_code}"
    if task.status == Task.Status.KILLED:
        return "stopped" + (f" (exit code {task.exit_code})" if task.exit_code is not None else "")
    return f"failed: {task.error or 'no exit code'}"
