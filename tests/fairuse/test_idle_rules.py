"""The idle rules on stored probes: which policy applies, jobs, silent hosts, keep vs release."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from fairuse import idle, services
from fairuse.models import GpuActivity, IdleNotice, IdlePolicy
from fairuse.policy import Policy, policy_for
from jobs.models import Job, Task
from monitoring.models import Host
from reservations.services import create_reservation

State = IdleNotice.State


@pytest.fixture
def booking(node, owner, release_at_once):
    ensure_default_group()
    start = timezone.now() - timedelta(seconds=30)
    return create_reservation(
        owner,
        title="run",
        devices=list(node.devices.all()),
        start=start,
        end=start + timedelta(hours=2),
    )


def check(node):
    return idle.check_hosts([node.pk])


@pytest.mark.parametrize(
    "host_rule, group_rule, expected",
    [
        (None, None, Policy("release", 0, 0)),  # the site's settings
        (None, ("warn", 45), Policy("warn", 45, 15)),  # the owner's group
        (("release", 20), ("off", 45), Policy("release", 20, 15)),  # the host's rule first
        (("off", 20), None, Policy("off", 20, 15)),
    ],
)
def test_which_rule_applies(booking, node, owner, host_rule, group_rule, expected):
    if host_rule:
        IdlePolicy.objects.create(host=node, action=host_rule[0], minutes=host_rule[1])
    if group_rule:
        group = Group.objects.create(name="lab-a")
        owner.groups.add(group)
        IdlePolicy.objects.create(group=group, action=group_rule[0], minutes=group_rule[1])
    assert policy_for(booking) == expected


def test_of_several_group_rules_the_most_lenient_wins(booking, owner):
    for name, action, minutes in [("a", "release", 10), ("b", "warn", 60), ("c", "warn", 90)]:
        group = Group.objects.create(name=name)
        owner.groups.add(group)
        IdlePolicy.objects.create(group=group, action=action, minutes=minutes)
    assert policy_for(booking) == Policy("warn", 90, 15)


def test_a_booking_with_a_running_job_attached_is_never_idle(booking, node, owner):
    Probe(node).saw()
    check(node)
    assert IdleNotice.objects.get().state == State.WARNED
    job = Job.objects.create(owner=owner, name="train")
    Task.objects.create(
        job=job,
        host=node,
        template="t",
        command="t",
        reservation=booking,
        status=Task.Status.RUNNING,
    )
    Probe(node).saw()
    check(node)
    notice = IdleNotice.objects.get()
    assert notice.state == State.RESOLVED and "job" in notice.outcome
    booking.refresh_from_db()
    assert booking.end > timezone.now() and booking.devices.count() == 2
    assert not GpuActivity.objects.filter(idle_since__isnull=False).exists()


def test_a_silent_host_never_makes_a_booking_look_idle(booking, node):
    Probe(node).saw(reachable=False)
    check(node)
    assert not IdleNotice.objects.exists() and not GpuActivity.objects.exists()


def test_observations_too_old_do_not_count(booking, node):
    Probe(node).saw()
    check(node)
    IdleNotice.objects.all().delete()
    GpuActivity.objects.update(observed_at=timezone.now() - timedelta(minutes=5))
    assert idle.decide(booking, timezone.now()) is None


def test_a_keep_after_the_release_is_refused_and_changes_nothing(booking, node, owner):
    Probe(node).saw()
    check(node)
    check(node)  # released: the whole booking ended
    booking.refresh_from_db()
    with pytest.raises(ValidationError, match="Too late"):
        services.keep(booking, owner)
    assert list(IdleNotice.objects.values_list("state", flat=True)) == [State.RELEASED]


def test_a_keep_before_any_warning_exempts_the_booking(booking, node, owner):
    services.keep(booking, owner)
    services.keep(booking, owner)  # twice is the same as once
    Probe(node).saw()
    check(node)
    assert list(IdleNotice.objects.values_list("state", flat=True)) == [State.KEPT]


def test_the_warn_rule_only_warns(booking, node, settings):
    settings.FAIRUSE_IDLE_ACTION = "warn"
    for _ in range(3):
        Probe(node).saw()
        check(node)
    notice = IdleNotice.objects.get()
    assert notice.state == State.WARNED and notice.release_at is None
    booking.refresh_from_db()
    assert booking.devices.count() == 2


def test_off_does_not_even_queue_a_check(booking, node, settings):
    settings.FAIRUSE_IDLE_ACTION = "off"
    assert not idle.worth_checking([node.pk], timezone.now())
    IdlePolicy.objects.create(host=node, action="warn")
    assert idle.worth_checking([node.pk], timezone.now())


class Probe:
    """The node's latest probe with both GPUs at 0 % and the given reachability."""

    def __init__(self, host: Host):
        self.host = host

    def saw(self, reachable=True):
        self.host.status = Host.Status.UP if reachable else Host.Status.UNREACHABLE
        self.host.last_probe_at = timezone.now()
        gpus = [{"uuid": d.uuid, "utilization_gpu": 0.0} for d in self.host.devices.all()]
        self.host.last_snapshot = {"reachable": reachable, "gpus": gpus, "processes": []}
        self.host.save()
