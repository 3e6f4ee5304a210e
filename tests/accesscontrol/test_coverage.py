"""check_access and coverage on cases worth reading: DST, overnight, chains, bans, scopes."""

from datetime import date, time, timedelta

import pytest

from accesscontrol.coverage import check_access, coverage_map, covered_intervals
from accesscontrol.models import Grant, Window
from accesscontrol.services import ban_user
from monitoring.models import Device

from .conftest import utc


def grant(*, users=(), groups=(), scope="all", hosts=(), devices=(), windows=(), **dates):
    g = Grant.objects.create(name="g", scope=scope, valid_from=date(2025, 1, 1), **dates)
    g.users.set(users)
    g.groups.set(groups)
    g.hosts.set(hosts)
    g.devices.set(devices)
    for days, opens, closes in windows:
        Window.objects.create(grant=g, weekdays=days, start=opens, end=closes)
    return g


MONDAYS_8_16 = [("0", time(8), time(16))]


def test_it_denies_by_default(warsaw, owner, gpu):
    decision = check_access(owner, gpu, utc(2025, 6, 2, 8), utc(2025, 6, 2, 9))
    assert not decision.allowed
    assert decision.uncovered == [(utc(2025, 6, 2, 8), utc(2025, 6, 2, 9))]
    assert decision.reason == (
        "owner is not allowed on node-1:0 from Mon 02 Jun 10:00 2025"
        " to Mon 02 Jun 11:00 2025 (Europe/Warsaw)"
    )


def test_it_keeps_local_hours_across_daylight_saving(warsaw, owner, gpu):
    grant(users=[owner], windows=MONDAYS_8_16)
    winter = covered_intervals(owner, gpu, utc(2025, 3, 24), utc(2025, 3, 25))
    summer = covered_intervals(owner, gpu, utc(2025, 3, 31), utc(2025, 4, 1))
    assert winter == [(utc(2025, 3, 24, 7), utc(2025, 3, 24, 15))]  # CET, UTC+1
    assert summer == [(utc(2025, 3, 31, 6), utc(2025, 3, 31, 14))]  # CEST, UTC+2


def test_it_names_the_uncovered_part_of_an_overnight_request(warsaw, owner, gpu):
    grant(users=[owner], windows=[("4", time(22), time(6))])  # Fri 22:00 -> Sat 06:00
    # Fri 13 June 20:00 to Sat 08:00 local: the first two and last two hours are missing.
    decision = check_access(owner, gpu, utc(2025, 6, 13, 18), utc(2025, 6, 14, 6))
    assert decision.uncovered == [
        (utc(2025, 6, 13, 18), utc(2025, 6, 13, 20)),
        (utc(2025, 6, 14, 4), utc(2025, 6, 14, 6)),
    ]
    assert (
        "from Fri 13 Jun 20:00 2025 to Fri 13 Jun 22:00 2025, from Sat 14 Jun 06:00 2025"
        in decision.reason
    )
    assert check_access(owner, gpu, utc(2025, 6, 13, 20), utc(2025, 6, 14, 4)).allowed


def test_it_allows_what_chained_grants_cover_together(warsaw, owner, students, gpu):
    grant(users=[owner], windows=[("0", time(8), time(12))])
    grant(groups=[students], windows=[("0", time(12), time(16))])
    assert check_access(owner, gpu, utc(2025, 6, 2, 6), utc(2025, 6, 2, 14)).allowed
    assert not check_access(owner, gpu, utc(2025, 6, 2, 6), utc(2025, 6, 2, 15)).allowed


def test_it_stops_at_the_last_day_and_starts_at_the_first(warsaw, owner, gpu):
    grant(users=[owner], valid_until=date(2025, 5, 31))
    assert check_access(owner, gpu, utc(2025, 5, 31, 12), utc(2025, 5, 31, 21, 59)).allowed
    late = check_access(owner, gpu, utc(2025, 5, 31, 12), utc(2025, 6, 1, 12))
    assert late.uncovered == [(utc(2025, 5, 31, 22), utc(2025, 6, 1, 12))]  # local midnight
    assert not check_access(owner, gpu, utc(2024, 12, 31, 12), utc(2024, 12, 31, 13)).allowed


def test_it_covers_gpus_that_appear_on_a_granted_host_later(warsaw, owner, node1, node2):
    grant(users=[owner], scope="hosts", hosts=[node1])
    newcomer = Device.objects.create(host=node1, index=7, uuid="GPU-new")
    span = (utc(2025, 6, 2), utc(2025, 6, 3))
    assert check_access(owner, newcomer, *span).allowed
    assert not check_access(owner, node2.devices.get(), *span).allowed


def test_it_limits_device_grants_to_those_devices(warsaw, owner, node1):
    first, second = node1.devices.order_by("index")
    grant(users=[owner], scope="devices", devices=[second])
    covered = coverage_map(owner, utc(2025, 6, 2), utc(2025, 6, 3))
    assert covered[first] == [] and covered[second] == [(utc(2025, 6, 2), utc(2025, 6, 3))]


def test_its_reads_grow_with_the_kinds_of_scope_not_with_what_grants_name(
    warsaw, owner, node1, node2, django_assert_num_queries
):
    """Every start asks this (the start rule): bans, grants and windows are one query each;
    hosts and GPUs are read only for grants scoped to them, one query per kind. Until they
    change, they are kept: then only the change token is read, once for both
    (accesscontrol.changes)."""
    span = (utc(2025, 6, 2), utc(2025, 6, 3))
    grant(users=[owner], windows=MONDAYS_8_16)
    devices = list(Device.objects.select_related("host"))
    with django_assert_num_queries(1 + 3):
        coverage_map(owner, *span, devices)
    with django_assert_num_queries(1):
        coverage_map(owner, *span, devices)
    grant(users=[owner], scope="hosts", hosts=[node2])
    for index in range(4):
        grant(users=[owner], scope="devices", devices=[node1.devices.get(index=index % 2)])
    with django_assert_num_queries(1 + 5):
        covered = coverage_map(owner, *span, devices)
    monday = [(utc(2025, 6, 2, 6), utc(2025, 6, 2, 14))]  # the windowed grant alone, CEST
    assert all(covered[d] == [span] for d in devices)  # each scoped grant covers its own
    grant_with_nothing = grant(users=[owner], scope="devices")
    assert coverage_map(owner, *span, devices) == covered
    grant_with_nothing.delete()
    Grant.objects.exclude(scope="all").delete()
    assert all(c == monday for c in coverage_map(owner, *span, devices).values())


def test_it_refuses_a_banned_user_with_the_reason_at_once(warsaw, owner, gpu):
    grant(users=[owner])
    span = (utc(2030, 6, 2), utc(2030, 6, 3))
    assert check_access(owner, gpu, *span).allowed
    ban_user(owner, "ran jobs on reserved GPUs", until=utc(2031, 1, 1, 12))
    decision = check_access(owner, gpu, *span)
    assert not decision.allowed and decision.uncovered == [span]
    assert decision.reason == (
        "owner is banned until Wed 01 Jan 13:00 2031: ran jobs on reserved GPUs"
    )
    assert covered_intervals(owner, gpu, *span) == []


def test_it_forgets_an_expired_ban(warsaw, owner, gpu):
    grant(users=[owner])
    ban = ban_user(owner, "cooling off")
    ban.created, ban.until = utc(2020, 1, 1), utc(2020, 1, 2)
    ban.save()
    assert check_access(owner, gpu, utc(2030, 6, 2), utc(2030, 6, 3)).allowed


def test_it_answers_for_a_group_only_what_names_the_group(warsaw, owner, students, gpu):
    grant(users=[owner])
    grant(groups=[students], windows=MONDAYS_8_16)
    covered = covered_intervals(students, gpu, utc(2025, 6, 2), utc(2025, 6, 3))
    assert covered == [(utc(2025, 6, 2, 6), utc(2025, 6, 2, 14))]


def test_it_refuses_empty_and_naive_periods(owner, gpu):
    assert not check_access(owner, gpu, utc(2025, 6, 2), utc(2025, 6, 2)).allowed
    with pytest.raises(ValueError, match="aware"):
        check_access(owner, gpu, utc(2025, 6, 2).replace(tzinfo=None), utc(2025, 6, 3))


def test_it_says_how_many_more_periods_are_missing(warsaw, owner, gpu):
    grant(users=[owner], windows=[("0123456", time(12), time(13))])
    decision = check_access(owner, gpu, utc(2025, 6, 2), utc(2025, 6, 2) + timedelta(days=3))
    assert len(decision.uncovered) == 4
    assert decision.reason.endswith("and 1 more period (Europe/Warsaw)")


def test_it_refuses_the_part_a_scheduled_ban_covers(warsaw, owner, gpu):
    grant(users=[owner])
    ban = ban_user(owner, "cluster-wide audit", until=utc(2030, 6, 2, 12))
    ban.created = utc(2030, 6, 2, 10)
    ban.save()
    span = (utc(2030, 6, 2), utc(2030, 6, 3))
    decision = check_access(owner, gpu, *span)
    assert decision.uncovered == [(utc(2030, 6, 2, 10), utc(2030, 6, 2, 12))]
    assert decision.reason == (
        "owner is banned from Sun 02 Jun 12:00 2030 until Sun 02 Jun 14:00 2030: cluster-wide audit"
    )
    assert check_access(owner, gpu, utc(2030, 6, 2, 12), utc(2030, 6, 3)).allowed
