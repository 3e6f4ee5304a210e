"""Idle bookings: after each monitoring cycle, note which reserved GPUs are in use; warn
about a booking idle for the policy's minutes, then give its idle GPUs back unless the
owner keeps it.

A reserved GPU is *in use* when the latest probe shows one of the owner's processes on it
or its utilisation at or above RESERVATION_IDLE_UTILIZATION. A booking with a running job
attached is never idle. Runs as a django-q2 task queued by the ``cycle_finished``
receiver; it reads the stored probes (``Host.last_snapshot``), never SSH.
"""

import logging
from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from accesscontrol.services import profile_for
from allocation.holders import RESERVATION, Holding, holders
from audit.log import record
from core import lease
from jobs.models import Task
from monitoring.models import Host
from reservations.calendar import device_label
from reservations.models import Reservation
from reservations.services import release_devices

from . import mail
from .models import GpuActivity, IdleNotice
from .policy import Policy, any_policy_on, policy_for

log = logging.getLogger(__name__)

ACTIVITY = "fairuse-idle"
State = IdleNotice.State


def running_slots(host_ids, at: datetime) -> list[Holding]:
    """The confirmed bookings' holdings of these hosts' GPUs at ``at``."""
    return [h for h in holders(at, hosts=host_ids, kinds={RESERVATION}) if h.confirmed]


def worth_checking(host_ids, at: datetime) -> bool:
    """Asked every cycle in the probing loop: two cheap queries at most."""
    return any_policy_on() and bool(running_slots(host_ids, at))


def check_hosts(host_ids: list[int]) -> str:
    """The task: observe the hosts of one cycle, then decide on the bookings seen there."""
    now = timezone.now()
    seen = observe_hosts(host_ids, now)
    outcomes = Counter()
    for reservation in Reservation.objects.filter(pk__in=seen).select_related("owner"):
        try:
            outcomes[decide(reservation, now)] += 1
        except Exception as exc:  # one booking's failure never stops the others
            log.exception("fairuse: deciding on reservation %s failed", reservation.pk)
            lease.record_failure(ACTIVITY, f"reservation {reservation.pk}: {exc!r}")
    outcomes.pop(None, None)
    summary = f"{len(seen)} booking(s) observed" + "".join(
        f", {n} {what}" for what, n in sorted(outcomes.items())
    )
    lease.record_success(ACTIVITY, summary)
    return summary


# --- observing --------------------------------------------------------------------------


def observe_hosts(host_ids, now: datetime) -> set[int]:
    """Update each running booking's GPU activity from the hosts' latest probes. Each host
    is on its own: one whose observation fails is recorded and the others are observed."""
    seen = set()
    for host in Host.objects.filter(pk__in=host_ids):
        try:
            seen |= observe_host(host, now)
        except Exception as exc:
            log.exception("fairuse: observing %s failed", host.name)
            lease.record_failure(ACTIVITY, f"observing {host.name} failed: {exc!r}")
    return seen


def observe_host(host: Host, now: datetime) -> set[int]:
    """The bookings running on ``host`` whose GPU activity this probe updated."""
    snapshot = host.last_snapshot or {}
    if host.status != Host.Status.UP or not snapshot.get("reachable"):
        return set()  # we cannot tell: a silent host never makes a booking look idle
    slots = running_slots([host.pk], now)
    owners = get_user_model().objects.in_bulk({slot.owner_id for slot in slots})
    uuids = dict(host.devices.values_list("pk", "uuid"))
    for slot in slots:
        unix = profile_for(owners[slot.owner_id]).unix_username_for(host)
        observe(slot, in_use(snapshot, uuids[slot.device_id], unix), now)
    return {slot.holder_id for slot in slots}


def in_use(snapshot: dict, uuid: str, owner_unix: str) -> bool:
    if any(
        p.get("gpu_uuid") == uuid and p.get("user") == owner_unix
        for p in snapshot.get("processes") or []
    ):
        return True
    for gpu in snapshot.get("gpus") or []:
        if gpu.get("uuid") == uuid and gpu.get("utilization_gpu") is not None:
            return gpu["utilization_gpu"] >= settings.RESERVATION_IDLE_UTILIZATION
    return False


def observe(slot: Holding, active: bool, now: datetime) -> None:
    row, created = GpuActivity.objects.get_or_create(
        reservation_id=slot.holder_id,
        device_id=slot.device_id,
        defaults={"observed_at": now, "idle_since": None if active else now},
    )
    row.observed_at = now
    if active:
        row.idle_since, row.last_active = None, now
    elif row.idle_since is None:
        row.idle_since = now
    row.save()


def mark_in_use(reservation: Reservation, now: datetime) -> None:
    """A running job counts as use of every GPU: the idle clock restarts when it ends."""
    reservation.gpu_activity.update(idle_since=None, last_active=now)


def stale_before(now: datetime) -> datetime:
    return now - timedelta(seconds=max(60.0, 3 * settings.MONITORING_INTERVAL))


def idle_devices(reservation: Reservation, policy: Policy, now: datetime) -> list:
    """The GPUs seen idle for the policy's minutes by recent probes (unseen ones are not)."""
    rows = reservation.gpu_activity.filter(
        observed_at__gte=stale_before(now),
        idle_since__lte=now - timedelta(minutes=policy.minutes),
        device__in=reservation.devices.all(),
    ).select_related("device__host")
    return [row.device for row in rows]


# --- deciding ---------------------------------------------------------------------------


def decide(reservation: Reservation, now: datetime) -> str | None:
    """What this cycle does to one booking; returns what happened, None for nothing."""
    notice = reservation.idle_notices.filter(state=State.WARNED).first()
    if Task.objects.filter(reservation=reservation, status__in=Task.ACTIVE).exists():
        mark_in_use(reservation, now)
        return resolve(notice, now, "a job attached to it is running") if notice else None
    policy = policy_for(reservation)
    if policy.action == "off" or reservation.idle_notices.filter(state=State.KEPT).exists():
        return None
    idle = idle_devices(reservation, policy, now)
    if notice is None:
        return warn(reservation, idle, policy, now) if idle else None
    if not idle:
        return resolve(notice, now, "its GPUs are in use again")
    if notice.release_at is not None and notice.release_at <= now:
        return release(notice, idle, now)
    return None


def warn(reservation: Reservation, idle: list, policy: Policy, now: datetime) -> str | None:
    release_at = now + timedelta(minutes=policy.grace_minutes) if policy.releases else None
    try:
        with transaction.atomic():
            notice = IdleNotice.objects.create(
                reservation=reservation, action=policy.action, release_at=release_at
            )
            notice.devices.set(idle)
            record(
                "reservation.idle_warned",
                target=reservation,
                reservation=reservation.pk,
                gpus=[device_label(d) for d in idle],
                idle_minutes=policy.minutes,
                release_at=release_at.isoformat() if release_at else None,
            )
    except IntegrityError:
        return None  # another worker warned about this episode already
    transaction.on_commit(lambda: mail.send_warning(notice.pk))
    return "warned"


def resolve(notice: IdleNotice, now: datetime, why: str) -> str:
    IdleNotice.objects.filter(pk=notice.pk, state=State.WARNED).update(
        state=State.RESOLVED, closed_at=now, outcome=f"Not released: {why}."
    )
    return "resolved"


@transaction.atomic
def release(notice: IdleNotice, idle: list, now: datetime) -> str | None:
    # The conditional update claims the notice: a keep clicked a moment ago, or another
    # worker's release, leaves it untouched and us with nothing to do.
    labels = ", ".join(device_label(d) for d in idle)
    reservation = Reservation.objects.select_for_update().get(pk=notice.reservation_id)
    all_gone = {d.pk for d in idle} >= set(reservation.slots.values_list("device_id", flat=True))
    outcome = (
        f"Ended at {now:%H:%M} UTC: every GPU ({labels}) was idle."
        if all_gone
        else f"GPU(s) {labels} given back at {now:%H:%M} UTC, idle; the others stay booked."
    )
    claimed = IdleNotice.objects.filter(pk=notice.pk, state=State.WARNED).update(
        state=State.RELEASED, closed_at=now, outcome=outcome
    )
    if not claimed:
        return None
    note = f"{reservation.note}\n{outcome}".strip() if reservation.note else outcome
    release_devices(reservation, idle, note)
    reservation.gpu_activity.filter(device__in=idle).delete()
    record(
        "reservation.idle_released",
        target=reservation,
        reservation=reservation.pk,
        gpus=[device_label(d) for d in idle],
        ended=all_gone,
    )
    transaction.on_commit(lambda: mail.send_released(notice.pk))
    return "released"
