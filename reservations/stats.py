"""Per-user and per-group summary over a period: GPU-hours booked against GPU-hours used.

Booked: each holding reservation's overlap with the period times its GPUs. Used: the
busy GPU-minutes stored when a reservation ended (reservations.usage), so only ended ones
count as used; ongoing ones show as booked. A booking that crosses the period's edge counts
the share of its use that matches its share inside the period (its use is known as a whole,
not per hour), so used never exceeds booked. Two queries, whatever the number of bookings.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import Group
from django.db.models import Count

from .models import Reservation


@dataclass
class Line:
    name: str
    reservations: int = 0
    booked_hours: float = 0.0
    used_hours: float = 0.0

    @property
    def used_share(self) -> float | None:
        return round(100 * self.used_hours / self.booked_hours) if self.booked_hours else None


def _booked_hours(reservation: Reservation, start: datetime, end: datetime) -> float:
    overlap = min(reservation.end, end) - max(reservation.start, start)
    return max(overlap.total_seconds(), 0) / 3600 * reservation.gpu_count


def _used_hours(reservation: Reservation, booked_in_period: float) -> float:
    if not reservation.usage_final or not reservation.busy_minutes:
        return 0.0
    whole = _booked_hours(reservation, reservation.start, reservation.end)
    share = booked_in_period / whole if whole else 0.0
    return reservation.busy_minutes / 60 * share


def summary(start: datetime, end: datetime) -> tuple[list[Line], list[Line]]:
    reservations = (
        Reservation.objects.overlapping(start, end)
        .exclude(status=Reservation.Status.CANCELLED)
        .select_related("owner")
        .annotate(gpu_count=Count("slots"))
    )
    groups_of = defaultdict(list)
    for user_id, name in Group.user_set.through.objects.values_list("user_id", "group__name"):
        groups_of[user_id].append(name)
    users, groups = {}, {}
    for r in reservations:
        booked = _booked_hours(r, start, end)
        used = _used_hours(r, booked)
        name = r.owner.get_username()
        for line in [users.setdefault(name, Line(name))] + [
            groups.setdefault(g, Line(g)) for g in groups_of[r.owner_id]
        ]:
            line.reservations += 1
            line.booked_hours += booked
            line.used_hours += used
    return sorted(users.values(), key=lambda x: x.name), sorted(
        groups.values(), key=lambda x: x.name
    )
