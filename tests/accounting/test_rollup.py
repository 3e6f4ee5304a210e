"""Daily figures against the hand-computed history in conftest."""

import pytest
from django.contrib.auth import get_user_model

from accounting import reports, rollup
from accounting.models import DailyUsage

from .conftest import DAY, NOW

User = get_user_model()


def rows(day):
    return {
        (r.device.index, r.user.username if r.user else None): (
            r.reserved_seconds, r.unbooked_seconds, r.used_seconds, r.idle_seconds,
            pytest.approx(r.energy_wh),
        )
        for r in DailyUsage.objects.filter(day=day).select_related("device", "user")
    }  # fmt: skip


def test_a_day_by_hand(history):
    rollup.compute_day(DAY, NOW)
    assert rows(DAY) == {
        (0, "owner"): (7200, 0, 3600, 3600, 250.0),
        (1, "other"): (0, 5400, 1800, 0, 50.0),
        (1, None): (0, 0, 1870, 0, 50 + 70 / 36),
    }


def test_a_booking_across_midnight_is_split_and_unsampled_time_counts_nothing(history):
    next_day = DAY.replace(day=11)
    rollup.compute_day(next_day, NOW)
    assert rows(next_day) == {(0, "owner"): (7200, 0, 0, 0, 0.0)}


def test_recomputing_never_double_counts(history):
    for _ in range(2):
        rollup.compute_day(DAY, NOW)
    assert DailyUsage.objects.filter(day=DAY).count() == 3


def test_today_counts_only_up_to_now(history):
    rollup.compute_day(DAY, NOW.replace(year=2026, month=3, day=10, hour=23))  # 23:00 on D
    assert rows(DAY)[0, "owner"] == (3600, 0, 3600, 0, 200.0)


def test_reports_per_user_host_and_month(history, admin_user, owner):
    rollup.compute_day(DAY, NOW)
    rollup.compute_day(DAY.replace(day=11), NOW)
    by_user = reports.report(admin_user, by="user", period="day", start=DAY, end=DAY)
    assert [(line.name, line.reserved_hours, line.unbooked_hours, line.used_hours,
             line.idle_hours, line.energy_kwh) for line in by_user] == [
        ("(nobody)", 0, 0, 0.519, 0, 0.0519),
        ("other", 0, 1.5, 0.5, 0, 0.05),
        ("owner", 2.0, 0, 1.0, 1.0, 0.25),
    ]  # fmt: skip
    assert by_user[2].co2e_kg == pytest.approx(0.0875)
    by_host = reports.report(admin_user, by="host", period="month", start=DAY,
                             end=DAY.replace(day=11))  # fmt: skip
    assert [(line.period.isoformat(), line.name, line.reserved_hours, line.used_hours)
            for line in by_host] == [("2026-03-01", "node-1", 4.0, 2.019)]  # fmt: skip
    mine = reports.report(owner, by="host", period="week", start=DAY, end=DAY.replace(day=11))
    assert [(line.name, line.reserved_hours, line.energy_kwh) for line in mine] == [
        ("node-1", 4.0, 0.25)
    ]


def test_groups_sum_their_members(history, admin_user, owner, other_user):
    from django.contrib.auth.models import Group

    Group.objects.create(name="lab-a").user_set.add(owner, other_user)
    rollup.compute_day(DAY, NOW)
    lines = reports.report(admin_user, by="group", period="day", start=DAY, end=DAY)
    assert [(line.name, line.used_hours) for line in lines] == [
        ("(no group)", 0.519), ("lab-a", 1.5)
    ]  # fmt: skip
