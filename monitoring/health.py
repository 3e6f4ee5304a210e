"""``/healthz`` for monitors and load balancers: the database, the task broker, how old the
last probing cycle is and how old the last task a worker finished, and the notifications'
backlog. JSON; 200 when all is well, 503 otherwise. Open to anyone (monitors have no
account): it tells ages, counts and yes/no, never an error's text, host names or addresses."""

import logging

from django.conf import settings
from django.core import checks as dj_checks
from django.db import connection
from django.db.models import Max
from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from core.models import Activity

from .dbversion import UPGRADE_TAG
from .loop import LOOP_ACTIVITY
from .models import WorkerCluster

log = logging.getLogger(__name__)
BROKER_TIMEOUT = 2  # seconds: a monitor's own timeout is typically 5-10 s


@require_safe
@never_cache
def healthz(request):
    checks = {"database": {"ok": _database_answers()}}
    checks["broker"] = {"ok": _broker_answers(database=checks["database"]["ok"])}
    for name, when in _last_times(checks["database"]["ok"]).items():
        checks[name] = _fresh(when)
    checks["deliveries"] = _deliveries(checks["database"]["ok"])
    checks["upgrade"] = _upgrade(checks["database"]["ok"])
    healthy = all(check["ok"] for check in checks.values())
    body = {"status": "ok" if healthy else "failing", "checks": checks}
    return JsonResponse(body, status=200 if healthy else 503)


def _database_answers() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception as exc:  # any driver error means "no": the text stays in the log
        log.warning("healthz: the database does not answer: %s", exc)
        return False


def _broker_answers(database: bool) -> bool:
    """Redis answers PING; without Redis the broker is the database."""
    if not settings.REDIS_URL:
        return database
    import redis  # here: about 7 MiB the web process needs only with a Redis broker

    try:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=BROKER_TIMEOUT, socket_connect_timeout=BROKER_TIMEOUT
        )
        with client:
            return bool(client.ping())
    except Exception as exc:
        log.warning("healthz: the broker does not answer: %s", exc)
        return False


def _last_times(database: bool) -> dict:
    """The last probing cycle stored and the last task finished by a supervised cluster."""
    if not database:
        return {"probe": None, "tasks": None}
    try:
        probe = Activity.objects.filter(name=LOOP_ACTIVITY).aggregate(t=Max("last_success_at"))
        tasks = WorkerCluster.objects.aggregate(t=Max("last_task_at"))
        return {"probe": probe["t"], "tasks": tasks["t"]}
    except Exception as exc:
        log.warning("healthz: reading the heartbeat failed: %s", exc)
        return {"probe": None, "tasks": None}


def _deliveries(database: bool) -> dict:
    """The notifications' backlog. Failing only when a delivery has been due longer than
    NOTIFY_BACKLOG_SECONDS and no sender reported within that time: one user's dead
    webhooks wait their turn behind a working sender (notifications.sender), and must not
    make the service look down."""
    if not database:
        return {"ok": False}
    from notifications.send import backlog
    from notifications.sender import ACTIVITY

    try:
        found = backlog()
        beat = Activity.objects.filter(name=ACTIVITY).aggregate(t=Max("last_success_at"))["t"]
    except Exception as exc:
        log.warning("healthz: reading the notifications' backlog failed: %s", exc)
        return {"ok": False}
    limit = settings.NOTIFY_BACKLOG_SECONDS
    overdue = (found["oldest_due_seconds"] or 0) > limit
    sender_alive = beat is not None and (timezone.now() - beat).total_seconds() <= limit
    return {"ok": not overdue or sender_alive, **found}


def _upgrade(database: bool) -> dict:
    """Failing when this code must not run on the database (a newer version migrated it);
    the count of what an upgrade left for the admin (``manage.py doctor`` names them)."""
    if not database:
        return {"ok": False}
    issues = dj_checks.run_checks(tags=[UPGRADE_TAG], databases=["default"])
    serious = sum(issue.level >= dj_checks.ERROR for issue in issues)
    return {"ok": not serious, "left_for_admin": len(issues) - serious}


def _fresh(when) -> dict:
    """Ok when it happened within WORKERS_STALL_SECONDS (the supervisor's own limit)."""
    if when is None:
        return {"ok": False, "age_seconds": None}
    age = max(0.0, (timezone.now() - when).total_seconds())
    return {"ok": age <= settings.WORKERS_STALL_SECONDS, "age_seconds": round(age, 1)}
