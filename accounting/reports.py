"""Sums of the daily rows per user, group, host or GPU and per day, week or month.

A MIG slice is a GPU of its own here (its bookings and tasks are its own rows); a booking of
its whole GPU is charged on the GPU, once, not on each slice as well.

Non-admins only ever see rows charged to themselves (their use, per host or group);
admins see everyone's. CO2e is energy times ACCOUNTING_EMISSION_G_PER_KWH. What each
figure means, and the invariants every line keeps (idle <= reserved): accounting.rollup.
"""

from dataclasses import dataclass
from datetime import date

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import F, Sum
from django.db.models.functions import TruncMonth, TruncWeek

from monitoring.models import Device

from .models import DailyUsage

GROUPINGS = {
    "user": "user__username",
    "group": "user__groups__name",
    "host": "device__host__name",
    "gpu": "device",  # each GPU and each MIG slice on its own line, named as on the board
}
PERIODS = {"day": F, "week": TruncWeek, "month": TruncMonth}
UNCHARGED = {"user": "(nobody)", "group": "(no group)", "host": "?", "gpu": "?"}


@dataclass(frozen=True)
class Line:
    period: date
    name: str
    reserved_hours: float
    unbooked_hours: float
    used_hours: float
    idle_hours: float
    energy_kwh: float

    @property
    def co2e_kg(self) -> float:
        return round(self.energy_kwh * settings.ACCOUNTING_EMISSION_G_PER_KWH / 1000, 4)

    def as_dict(self) -> dict:
        return {
            "period": self.period.isoformat(),
            "name": self.name,
            "reserved_hours": self.reserved_hours,
            "unbooked_hours": self.unbooked_hours,
            "used_hours": self.used_hours,
            "idle_hours": self.idle_hours,
            "energy_kwh": self.energy_kwh,
            "co2e_kg": self.co2e_kg,
        }


def check_choice(by: str, period: str, start: date, end: date) -> None:
    errors = {}
    if by not in GROUPINGS:
        errors["by"] = f"Choose one of: {', '.join(GROUPINGS)}."
    if period not in PERIODS:
        errors["period"] = f"Choose one of: {', '.join(PERIODS)}."
    if end < start:
        errors["end"] = "The end must not be before the start."
    elif (end - start).days > 800:
        errors["end"] = "Ask for at most 800 days at once."
    if errors:
        raise ValidationError(errors)


def sees_everyone(user) -> bool:
    """Staff see everyone's figures, as on the reservations' usage summary."""
    return user.is_staff or user.is_superuser


def report(viewer, *, by: str, period: str, start: date, end: date) -> list[Line]:
    """Lines for days start..end (both included), newest period first."""
    check_choice(by, period, start, end)
    rows = DailyUsage.objects.filter(day__gte=start, day__lte=end)
    if not sees_everyone(viewer):
        rows = rows.filter(user=viewer)
    sums = (
        rows.annotate(period=PERIODS[period]("day"), name=F(GROUPINGS[by]))
        .values("period", "name")
        .annotate(
            reserved=Sum("reserved_seconds"),
            unbooked=Sum("unbooked_seconds"),
            used=Sum("used_seconds"),
            idle=Sum("idle_seconds"),
            energy=Sum("energy_wh"),
        )
        .order_by("-period", "name")
    )
    names = _device_names(sums) if by == "gpu" else {}
    lines = [
        Line(
            period=_as_date(s["period"]),
            name=names.get(s["name"], s["name"]) or UNCHARGED[by],
            reserved_hours=round(s["reserved"] / 3600, 3),
            unbooked_hours=round(s["unbooked"] / 3600, 3),
            used_hours=round(s["used"] / 3600, 3),
            idle_hours=round(s["idle"] / 3600, 3),
            energy_kwh=round(s["energy"] / 1000, 4),
        )
        for s in sums
    ]
    # Sorted here, not in SQL: databases disagree on where NULL (nobody, no group) sorts.
    lines.sort(key=lambda line: line.name)
    lines.sort(key=lambda line: line.period, reverse=True)
    return lines


def _device_names(sums) -> dict[int, str]:
    """Device id -> its name (node-1:0, node-1:0.2 (1g.10gb) for a MIG slice)."""
    ids = {s["name"] for s in sums}
    return {d.pk: str(d) for d in Device.objects.filter(pk__in=ids).select_related("host")}


def _as_date(value) -> date:
    return value.date() if hasattr(value, "date") else value
