"""The scheduled work of notifications (django-q2), registered by `manage.py serve`."""

from monitoring import lease
from monitoring.loop import ensure_minute_schedules

from . import send

ACTIVITY = "notifications"
SCHEDULES = {"notifications: retries": ("notifications.schedules.run_retries", 1)}


def ensure_schedules() -> None:
    ensure_minute_schedules(SCHEDULES)


def run_retries() -> str:
    try:
        sent = send.retry_due()
    except Exception as exc:
        lease.record_failure(ACTIVITY, exc)
        raise
    summary = f"{sent} notification(s) sent on retry"
    lease.record_success(ACTIVITY, summary)
    return summary
