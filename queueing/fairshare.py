"""Fair-share: recent use of GPUs lowers a user's queued jobs against others of equal priority.

Usage is GPU-hours held, from bookings (each reserved GPU, while the booking ran) and from
queue runs (their GPUs, while they ran), each hour weighted by 2^(-age / half-life), so use
a half-life ago counts half and use four half-lives ago hardly at all (it is not read).
With u the user's usage and ū the average over the users who used GPUs or wait in the
queue, a job's factor is

    F = 2^(-u/ū)                            (1 with no use, 0.5 at the average)
    F = 2^(-(u/ū + g/ḡ) / 2)                for a job charged to a group, where g is the
                                            group's members' usage and ḡ the groups' average

This is Slurm's classic fair-share with equal shares. The queue orders by guarantee, then
priority, then F (highest first), then arrival. QUEUE_FAIRSHARE_HALF_LIFE_HOURS = 0 turns it
off (every factor 1).
"""

import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from reservations.models import Reservation, ReservedDevice

from .models import QueueRun

CACHE_KEY = "queue-fairshare"
LOOKBACK_HALF_LIVES = 4


def half_life() -> timedelta:
    return timedelta(hours=settings.QUEUE_FAIRSHARE_HALF_LIFE_HOURS)


def decayed_hours(start: datetime, end: datetime, now: datetime) -> float:
    """∫ 2^(-(now - t)/H) dt over [start, end] clipped to the past, in hours."""
    end = min(end, now)
    if end <= start:
        return 0.0
    h = half_life().total_seconds() / 3600
    age_end = (now - end).total_seconds() / 3600
    age_start = (now - start).total_seconds() / 3600
    return h / math.log(2) * (2 ** (-age_end / h) - 2 ** (-age_start / h))


def _bookings(since: datetime, now: datetime):
    return (
        ReservedDevice.objects.holding(since, now)
        .exclude(reservation__status=Reservation.Status.CANCELLED)
        .values_list("reservation__owner_id", "start", "end")
    )


def _queue_runs(since: datetime, now: datetime):
    runs = QueueRun.objects.filter(Q(ended_at=None) | Q(ended_at__gt=since), started_at__lt=now)
    return runs.values_list("queued_job__owner_id", "started_at", "ended_at", "gpus")


def user_usage(now: datetime) -> dict[int, float]:
    """User id -> decayed GPU-hours."""
    since = now - LOOKBACK_HALF_LIVES * half_life()
    usage: dict[int, float] = defaultdict(float)
    for owner, start, end in _bookings(since, now):
        usage[owner] += decayed_hours(max(start, since), end, now)
    for owner, start, end, gpus in _queue_runs(since, now):
        usage[owner] += gpus * decayed_hours(max(start, since), end or now, now)
    return dict(usage)


@dataclass
class Shares:
    """The usage of users and groups at one moment, and the factors it gives."""

    users: dict[int, float] = field(default_factory=dict)
    groups: dict[int, float] = field(default_factory=dict)
    user_average: float = 0.0
    group_average: float = 0.0

    def factor(self, user_id: int, group_id: int | None = None) -> float:
        if not self.user_average:
            return 1.0
        ratio = self.users.get(user_id, 0.0) / self.user_average
        if group_id is not None and self.group_average:
            ratio = (ratio + self.groups.get(group_id, 0.0) / self.group_average) / 2
        return 2**-ratio

    def sentence(self, user_id: int, group_id: int | None = None) -> str:
        hours = settings.QUEUE_FAIRSHARE_HALF_LIFE_HOURS
        span = f"{hours:g} hours" if hours < 48 else f"{hours / 24:g} days"
        return (
            f"your fair-share factor {self.factor(user_id, group_id):.2f}: you used "
            f"{self.users.get(user_id, 0.0):.0f} GPU-hours recently (half-life {span}), "
            f"the lab average is {self.user_average:.0f}"
        )


def compute(waiting_users, waiting_groups, now: datetime | None = None) -> Shares:
    """Averages over those who used GPUs or wait now: a newcomer lowers nobody's factor."""
    if settings.QUEUE_FAIRSHARE_HALF_LIFE_HOURS <= 0:
        return Shares()
    users = user_usage(now or timezone.now())
    groups: dict[int, float] = defaultdict(float)
    members = Group.objects.filter(user__in=users).values_list("pk", "user")
    for group_id, user_id in members:
        groups[group_id] += users[user_id]
    people = set(users) | set(waiting_users)
    teams = set(groups) | {g for g in waiting_groups if g is not None}
    return Shares(
        users=users,
        groups=dict(groups),
        user_average=sum(users.values()) / len(people) if people else 0.0,
        group_average=sum(groups.values()) / len(teams) if teams else 0.0,
    )


def current(waiting_users, waiting_groups) -> Shares:
    """compute(), cached for QUEUE_FAIRSHARE_CACHE_SECONDS (pages ask on every view)."""
    seconds = settings.QUEUE_FAIRSHARE_CACHE_SECONDS
    who = f"{sorted(waiting_users)}:{sorted(g for g in waiting_groups if g)}"
    key = f"{CACHE_KEY}:{hashlib.sha256(who.encode()).hexdigest()}"
    shares = cache.get(key) if seconds > 0 else None
    if shares is None:
        shares = compute(waiting_users, waiting_groups)
        if seconds > 0:
            cache.set(key, shares, seconds)
    return shares
