"""Background work of jobs, run by the django-q2 workers. Arguments are IDs, never instances.

``after_cycle`` is enqueued after a monitoring cycle (every MONITORING_INTERVAL seconds) when
hosts of that cycle have active tasks, a scheduled start/stop/kill is due or a gpurun
stopped feeding its job (see receivers.py): the probing loop, watched by its own schedule, is
the clock.
"""

import logging
import os
import socket

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from core import lease
from monitoring.models import Host
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
        return f"{sync_running(host_ids)}; {run_due_actions()}{tell_lapsed_feeds()}"
    finally:
        lease.release(SYNC_ACTIVITY, holder)


def sync_running(host_ids=None) -> str:
    """Update running and stopping tasks from their hosts, then fetch their logs. Each host
    is on its own: one that cannot be asked is recorded (by name, where admins look) and the
    others are synced and their logs fetched all the same."""
    settled = recover_starts(host_ids)
    tasks, waiting = services.on_reachable_hosts(services.tasks_to_sync(host_ids))
    outcome = services.sync_by_host(tasks)
    if outcome.failures:
        lease.record_failure(SYNC_ACTIVITY, "; ".join(map(str, outcome.failures)))
    summary = (
        f"{len(tasks)} active tasks checked, {outcome.ended} ended{settled}"
        f"{services.waiting_summary(waiting)}"
    )
    if failed := len(outcome.failures):
        summary += f"; {failed} {'host' if failed == 1 else 'hosts'} could not be asked"
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
    e.g. "; interrupted starts: task 4 adopted, task 5 retried" for the sync's summary.
    Those on a host that does not answer wait for it."""
    done = []
    starts, _ = services.on_reachable_hosts(services.interrupted_starts(host_ids))
    for task in starts:
        try:
            done.append(f"task {task.pk} {services.recover_start(task)}")
        except Exception as exc:  # recorded; the others are settled, the next cycle retries
            log.exception("settling the interrupted start of task %s failed", task.pk)
            lease.record_failure(
                SYNC_ACTIVITY, f"interrupted start of task {task.pk} on {task.host}: {exc!r}"
            )
    return f"; interrupted starts: {', '.join(done)}" if done else ""


def due_tasks(now):
    """The tasks whose scheduled start, stop or kill is due. A stop or kill on a host that
    does not answer waits for the host (the kill's time is kept, not spent on a failure)."""
    starts = Task.objects.filter(status=Task.Status.PENDING, scheduled_start__lte=now)
    reachable = ~Q(host__status=Host.Status.UNREACHABLE)
    stops = Task.objects.filter(
        reachable,
        status=Task.Status.RUNNING,
        scheduled_stop__lte=now,
        stop_requested_at__isnull=True,
    )
    kills = Task.objects.filter(reachable, status=Task.Status.STOPPING, kill_at__lte=now)
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
    answering = ~Q(host__status=Host.Status.UNREACHABLE)  # the others wait for their host
    return (
        Task.objects.filter(active, answering).exists()
        or has_due_work()
        or actions.logs_wanted(host_ids)
        or lapsed_feeds().exists()
    )


def tell_job_ended(job_id: int) -> int:
    """Tell the owner that a job ended, with each task's outcome (once per job). A job that
    gpurun still feeds is not over when its tasks have all ended: gpurun tells it when it
    returns, or the sync after its feed lapsed (``tell_lapsed_feeds``)."""
    job = Job.objects.select_related("owner").get(pk=job_id)
    if job.fed_until and job.fed_until > timezone.now():
        return 0  # a gap between two of gpurun's commands
    tasks = list(job.tasks.select_related("host"))
    if any(t.status not in Task.ENDED for t in tasks):
        return 0  # a task was added or restarted meanwhile: not over
    lines = [f"task {t.pk} on {t.host}: {outcome(t)}" for t in tasks]
    link = settings.PUBLIC_URL.rstrip("/") + reverse("job-detail", args=[job.pk])
    subject = f"Your job '{job.name}' ended: {job.status}"
    return notify(job.owner, "job_ended", f"job-{job.pk}-ended", subject, "\n".join(lines), link)


def lapsed_feeds(now=None):
    """Jobs whose gpurun stopped renewing its feed without returning (killed outright)."""
    return Job.objects.filter(fed_until__lte=now or timezone.now())


def tell_lapsed_feeds(now=None) -> str:
    """Tell the end of each job whose feed lapsed, as gpurun would have when it returned
    (if its tasks have all ended; else the last one's end tells it). The feed is cleared
    in the same transaction: exactly one sync tells it, and a failure leaves it for the next."""
    told = []
    for job_id in lapsed_feeds(now).values_list("pk", flat=True):
        try:
            with transaction.atomic():
                if lapsed_feeds(now).filter(pk=job_id).update(fed_until=None):
                    told += [job_id] if tell_job_ended(job_id) else []
        except Exception as exc:  # recorded; the other jobs are told, the next sync retries
            log.exception("telling the end of job %s failed", job_id)
            lease.record_failure(SYNC_ACTIVITY, f"telling the end of job {job_id}: {exc!r}")
    if not told:
        return ""
    jobs = f"job{'s' if len(told) > 1 else ''} {', '.join(map(str, told))}"
    return f"; told the end of {jobs} (gpurun stopped feeding)"


def outcome(task: Task) -> str:
    if task.status == Task.Status.EXITED:
        return f"exit code {task.exit_code}"
    if task.status == Task.Status.KILLED:
        return "stopped" + (f" (exit code {task.exit_code})" if task.exit_code is not None else "")
    return f"failed: {task.error or 'no exit code'}"
