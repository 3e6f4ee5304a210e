"""The scheduled work of reservations (django-q2), registered by `manage.py serve`."""

from core import lease
from monitoring.loop import ensure_minute_schedules

from . import notifications, usage

NOTIFY_ACTIVITY = "reservation-mails"  # the name admins know; the notices go to any channel
USAGE_ACTIVITY = "reservation-usage"
SCHEDULES = {
    "reservations: reminders and idle warnings": ("reservations.schedules.run_notifications", 1),
    "reservations: final usage figures": ("reservations.schedules.run_finalise_usage", 5),
}


def ensure_schedules() -> None:
    """Create or update the schedules; safe to call on every start."""
    ensure_minute_schedules(SCHEDULES)


def run_notifications() -> str:
    try:
        sent = notifications.send_due()
    except Exception as exc:  # recorded where admins look, then re-raised for django-q2
        lease.record_failure(NOTIFY_ACTIVITY, exc)
        raise
    summary = ", ".join(f"{count} {kind}" for kind, count in sent.items()) + " notice(s) told"
    lease.record_success(NOTIFY_ACTIVITY, summary)
    return summary


def run_finalise_usage() -> str:
    try:
        count = usage.finalise_ended()
    except Exception as exc:
        lease.record_failure(USAGE_ACTIVITY, exc)
        raise
    summary = f"usage stored for {count} ended reservation(s)"
    lease.record_success(USAGE_ACTIVITY, summary)
    return summary
