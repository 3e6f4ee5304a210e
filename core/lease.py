"""Leases on Activity rows: a conditional UPDATE that changes exactly one row wins.

Works the same on SQLite and PostgreSQL, across processes and machines, with no lock held
between calls: a holder that dies simply stops renewing, and its lease expires.

Expiry is reckoned by ``clock()``, read by every function here and nowhere else, so tests
stand time still or move it on (``monkeypatch.setattr(lease, "clock", ...)``) instead of
sleeping until a lease runs out, and pass the same on a busy machine as on an idle one.
"""

import logging
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django_q.tasks import async_task

from .models import Activity

log = logging.getLogger(__name__)


def clock() -> datetime:
    """Now, as leases are reckoned (the service's clock; see the module's docstring)."""
    return timezone.now()


def activity(name: str) -> Activity:
    """The activity's row, created at first use (two creators racing is fine)."""
    try:
        with transaction.atomic():
            return Activity.objects.get_or_create(name=name)[0]
    except IntegrityError:
        return Activity.objects.get(name=name)


def acquire(name: str, holder: str, seconds: float) -> bool:
    """Take the lease if it is free, expired, or already ours; True if we hold it now."""
    activity(name)
    now = clock()
    free = Q(lease_expires__isnull=True) | Q(lease_expires__lte=now) | Q(holder=holder)
    taken = Activity.objects.filter(free, name=name).update(
        holder=holder, lease_expires=now + timedelta(seconds=seconds)
    )
    return taken == 1


def renew(name: str, holder: str, seconds: float) -> bool:
    """Extend our lease; False if someone else took it over after it expired.

    A takeover always changes the holder, so "still ours" is just "holder is us".
    """
    renewed = Activity.objects.filter(name=name, holder=holder).update(
        lease_expires=clock() + timedelta(seconds=seconds)
    )
    return renewed == 1


def release(name: str, holder: str) -> None:
    """Give the lease up at once, so a successor need not wait for it to expire."""
    Activity.objects.filter(name=name, holder=holder).update(holder="", lease_expires=None)


def holder_of(name: str) -> tuple[str, datetime | None]:
    """(holder, expiry) of the lease, for messages."""
    row = activity(name)
    return row.holder, row.lease_expires


def record_success(name: str, summary: str) -> None:
    """Note a background activity's last success (and what it did) where admins look."""
    _update(name, last_success_at=timezone.now(), last_summary=summary[:255])


def record_failure(name: str, error: BaseException | str) -> None:
    """Note a background activity's last failure, so no task or loop fails silently."""
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    _update(name, last_error_at=timezone.now(), last_error=message)


def _update(name: str, **fields: object) -> None:
    # One UPDATE on the usual path (the probing loop records every cycle); the row is
    # created only when an activity reports for the first time.
    if not Activity.objects.filter(name=name).update(**fields):
        activity(name)
        Activity.objects.filter(name=name).update(**fields)


def enqueue(name: str, func: str, *args: object, **options: object) -> bool:
    """Hand ``func`` to the workers; if the broker cannot take it (Redis gone), record that
    on activity ``name`` and go on, so the request or loop that asked does not fail after
    its own work is done. True if the task was queued."""
    try:
        async_task(func, *args, **options)
    except Exception as exc:
        log.exception("queueing %s failed", func)
        record_failure(name, f"queueing {func} failed: {exc!r}")
        return False
    return True
