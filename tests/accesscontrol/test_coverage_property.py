"""check_access and coverage, proven against the minute-by-minute oracle (Europe/Warsaw).

The ranges sit on the 2025 DST changes (30 March, 26 October) and a plain summer week, and
windows include overnight ones, full days and times inside the skipped/repeated hour.
"""

from datetime import date, time, timedelta
from zoneinfo import ZoneInfo

from django.contrib.auth.models import Group
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accesscontrol.coverage import Rule, WeeklyWindow, check_access, rules_coverage
from accesscontrol.models import Grant, Window
from monitoring.models import Device

from .conftest import utc
from .oracle import covered_minutes, minutes_of

ZONE = "Europe/Warsaw"
BASES = [utc(2025, 3, 28), utc(2025, 10, 24), utc(2025, 6, 6)]

times = st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 59]))
weekdays = st.frozensets(st.integers(0, 6), min_size=1)
windows = st.lists(st.tuples(weekdays, times, times), max_size=3)


@st.composite
def ranges(draw):
    start = draw(st.sampled_from(BASES)) + timedelta(minutes=draw(st.integers(0, 3 * 1440)))
    return start, start + timedelta(minutes=draw(st.integers(1, 2 * 1440)))


@st.composite
def rules(draw):
    valid_from = date(2025, 1, 1) + timedelta(days=draw(st.sampled_from([0, 86, 88, 160, 295])))
    length = draw(st.none() | st.integers(0, 4))
    valid_until = None if length is None else valid_from + timedelta(days=length)
    return valid_from, valid_until, draw(windows)


def as_rule(valid_from, valid_until, window_list) -> Rule:
    return Rule(valid_from, valid_until, tuple(WeeklyWindow(*w) for w in window_list))


@settings(max_examples=400, deadline=None)
@given(st.lists(rules(), max_size=4), ranges())
def test_it_covers_exactly_the_minutes_the_oracle_allows(rule_list, span):
    start, end = span
    covered = rules_coverage([as_rule(*r) for r in rule_list], start, end, ZoneInfo(ZONE))
    assert minutes_of(covered) == covered_minutes(rule_list, start, end, ZONE)


# --- through the database: who a grant names, where it applies -------------------------------


@st.composite
def grants(draw):
    return {
        "users": draw(st.sets(st.sampled_from(["owner", "other"]))),
        "groups": draw(st.sets(st.sampled_from(["students", "staff"]))),
        "scope": draw(st.sampled_from(["all", "hosts", "devices"])),
        "rule": draw(rules()),
    }


def save_grant(spec, people, node1, gpu):
    valid_from, valid_until, window_list = spec["rule"]
    grant = Grant.objects.create(
        name="g", scope=spec["scope"], valid_from=valid_from, valid_until=valid_until
    )
    grant.users.set([people[name] for name in spec["users"]])
    grant.groups.set([people[name] for name in spec["groups"]])
    grant.hosts.set([node1])
    grant.devices.set([gpu])
    for days, opens, closes in window_list:
        digits = "".join(map(str, days))
        Window.objects.create(grant=grant, weekdays=digits, start=opens, end=closes)


def applies(spec, device, node1, gpu) -> bool:
    """Owner is in 'students', not in 'staff'."""
    named = "owner" in spec["users"] or "students" in spec["groups"]
    where = {"all": True, "hosts": device.host_id == node1.pk, "devices": device == gpu}
    return named and where[spec["scope"]]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(grants(), max_size=4), ranges(), st.sampled_from([0, 1, 2]))
def test_it_decides_like_the_oracle_for_stored_grants(
    warsaw, owner, other_user, students, node1, node2, spec_list, span, device_choice
):
    people = {"owner": owner, "other": other_user, "students": students}
    people["staff"] = Group.objects.get_or_create(name="staff")[0]
    gpu = node1.devices.get(index=0)
    device = [gpu, node1.devices.get(index=1), node2.devices.get()][device_choice]
    start, end = span
    with transaction.atomic():
        for spec in spec_list:
            save_grant(spec, people, node1, gpu)
        decision = check_access(owner, Device.objects.get(pk=device.pk), start, end)
        transaction.set_rollback(True)
    relevant = [s["rule"] for s in spec_list if applies(s, device, node1, gpu)]
    allowed = covered_minutes(relevant, start, end, ZONE)
    assert minutes_of(decision.uncovered) == minutes_of([(start, end)]) - allowed
    assert decision.allowed == (not decision.uncovered)
