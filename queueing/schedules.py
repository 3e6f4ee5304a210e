"""The scheduled work of the queue (django-q2), registered by `manage.py serve`."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from core import lease
from monitoring.loop import ensure_minute_schedules
from notifications.send import notify

from .models import QueuedJob

ACTIVITY = "queue-waiting"
SCHEDULES = {"queue: tell owners of long waits": ("queueing.schedules.run_waiting_notices", 10)}


def ensure_schedules() -> None:
    ensure_minute_schedules(SCHEDULES)


def tell_long_waits() -> int:
    """Tell each owner once per job that it has waited QUEUE_NOTIFY_WAITING_HOURS, and why."""
    hours = settings.QUEUE_NOTIFY_WAITING_HOURS
    if hours <= 0:
        return 0
    since = timezone.now() - timedelta(hours=hours)
    told = 0
    waiting = QueuedJob.objects.filter(state=QueuedJob.State.WAITING, enqueued_at__lte=since)
    for queued in waiting.select_related("owner"):
        why = "\n".join(f"- {reason}" for reason in queued.reasons) or "- not looked at yet"
        text = f"'{queued}' has waited more than {hours:g} hours. Why, as of the last round:\n{why}"
        subject = f"Your queued job '{queued}' is still waiting"
        told += notify(queued.owner, "queued_waiting", f"queued-{queued.pk}-waiting", subject, text)
    return told


def run_waiting_notices() -> str:
    try:
        told = tell_long_waits()
    except Exception as exc:
        lease.record_failure(ACTIVITY, exc)
        raise
    summary = f"{told} owner(s) told of long waits"
    lease.record_success(ACTIVITY, summary)
    return summary
