"""The scheduled work of accounting (django-q2), registered by `manage.py serve`."""

from core import lease
from monitoring.loop import ensure_minute_schedules

from . import rollup

ACTIVITY = "accounting"
SCHEDULES = {"accounting: daily usage figures": ("accounting.schedules.run_rollup", 15)}


def ensure_schedules() -> None:
    ensure_minute_schedules(SCHEDULES)


def run_rollup() -> str:
    try:
        rows = rollup.compute_recent()
    except Exception as exc:  # recorded where admins look, then re-raised for django-q2
        lease.record_failure(ACTIVITY, exc)
        raise
    summary = f"{rows} daily usage row(s) for yesterday and today"
    lease.record_success(ACTIVITY, summary)
    return summary
