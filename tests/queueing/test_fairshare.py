"""Fair-share: decayed usage from bookings and queue runs orders equals in the queue."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from jobs.models import Job
from queueing import fairshare, services
from queueing.models import QueueRun
from queueing.scheduler import plan_round

from .conftest import queue, reserve


@pytest.fixture(autouse=True)
def ten_hour_half_life(settings):
    settings.QUEUE_FAIRSHARE_HALF_LIFE_HOURS = 10


def used(lab, node, user, gpus: int, hours_ago: float, hours: float):
    """user held ``gpus`` GPUs of node for ``hours``, ending ``hours_ago`` (a past booking)."""
    end = timezone.now() - timedelta(hours=hours_ago)
    reserve(user, [lab.gpu(node, i) for i in range(gpus)], end - timedelta(hours=hours), end)


@pytest.mark.parametrize(
    "hours_ago, hours, expected",
    [
        (0, 1, 10 / 0.693147 * (1 - 2**-0.1)),  # the last hour: ~0.966
        (10, 1, 10 / 0.693147 * (2**-1 - 2**-1.1)),  # one half-life ago: half of that
        (-1, 2, 10 / 0.693147 * (1 - 2**-0.1)),  # still running: only the past hour
        (0, 0, 0.0),
    ],
)
def test_decayed_hours_by_hand(hours_ago, hours, expected):
    now = timezone.now()
    end = now - timedelta(hours=hours_ago)
    value = fairshare.decayed_hours(end - timedelta(hours=hours), end, now)
    assert value == pytest.approx(expected, rel=1e-4)


def test_usage_counts_bookings_and_queue_runs_but_not_cancelled_ones(lab, owner, other_user):
    node = lab.host("node-1", gpus=4)
    used(lab, node, owner, gpus=2, hours_ago=0, hours=1)  # 2 x 0.966
    cancelled = reserve(other_user, [lab.gpu(node, 3)], timezone.now() - timedelta(hours=1),
                        timezone.now())  # fmt: skip
    cancelled.status = cancelled.Status.CANCELLED
    cancelled.save()
    queued = queue(other_user, "ran")
    job = Job.objects.create(owner=other_user, name="ran")
    QueueRun.objects.create(queued_job=queued, job=job, gpus=3,
                            started_at=timezone.now() - timedelta(hours=1))  # fmt: skip
    usage = fairshare.user_usage(timezone.now())
    one_hour = 10 / 0.693147 * (1 - 2**-0.1)
    assert usage[owner.pk] == pytest.approx(2 * one_hour, rel=1e-3)
    assert usage[other_user.pk] == pytest.approx(3 * one_hour, rel=1e-3)


# (user's GPUs held for the past hour) for owner, other, third -> order of their equal jobs,
# each enqueued in the order owner, other, third
CASES = [
    ((0, 0, 0), ["owner", "other", "third"]),  # nobody used anything: first come first served
    ((4, 1, 0), ["third", "other", "owner"]),  # heaviest last
    ((1, 4, 1), ["owner", "third", "other"]),  # equal use keeps arrival order
    ((0, 4, 0), ["owner", "third", "other"]),
]


@pytest.mark.parametrize("gpus, expected", CASES)
def test_fair_share_order_among_equal_priority(lab, owner, other_user, third_user, gpus,
                                               expected):  # fmt: skip
    node = lab.host("node-1", gpus=12)
    users = [owner, other_user, third_user]
    first = 0
    for user, count in zip(users, gpus, strict=True):
        devices = [lab.gpu(node, i) for i in range(first, first + count)]
        if devices:
            now = timezone.now()
            reserve(user, devices, now - timedelta(hours=1), now)
        first += count
    for user in users:
        queue(user, f"job of {user}")
    assert [j.owner.username for j in services.waiting_in_order()] == expected


def test_priority_and_guarantee_still_come_first(lab, owner, other_user):
    node = lab.host("node-1", gpus=4)
    used(lab, node, owner, gpus=4, hours_ago=0, hours=2)
    queue(other_user, "opportunistic", opportunistic=True)
    queue(other_user, "plain")
    queue(owner, "urgent", priority=0)
    assert [j.name for j in services.waiting_in_order()] == ["plain", "urgent", "opportunistic"]


def test_a_groups_use_lowers_its_members_jobs(lab, owner, other_user, third_user):
    node = lab.host("node-1", gpus=4)
    heavy, light = Group.objects.create(name="heavy"), Group.objects.create(name="light")
    heavy.user_set.add(owner, third_user)
    light.user_set.add(other_user)
    used(lab, node, third_user, gpus=4, hours_ago=0, hours=3)  # owner's group mate
    queue(owner, "owner's", group=heavy)
    queue(other_user, "other's", group=light)
    shares = services.waiting_shares(services.waiting_in_order())
    assert shares.factor(owner.pk, heavy.pk) < shares.factor(other_user.pk, light.pk)
    assert [j.name for j in services.waiting_in_order()] == ["other's", "owner's"]


def test_why_waiting_says_the_factor_and_the_usage(lab, owner, other_user):
    node = lab.host("node-1", gpus=2)
    used(lab, node, owner, gpus=2, hours_ago=0, hours=1)
    job = queue(owner, "too big", {"gpu_count": 8})
    plan = plan_round(timezone.now())
    # owner used 2 x 0.966 GPU-hours; the average is over owner alone: factor 2^-1
    assert plan.waiting[job.pk][-1] == (
        "your fair-share factor 0.50: you used 2 GPU-hours recently (half-life 10 hours), "
        "the lab average is 2"
    )


def test_off_keeps_first_come_first_served(lab, owner, other_user, settings):
    settings.QUEUE_FAIRSHARE_HALF_LIFE_HOURS = 0
    node = lab.host("node-1", gpus=4)
    used(lab, node, owner, gpus=4, hours_ago=0, hours=2)
    first = queue(owner, "first", {"gpu_count": 8})
    queue(other_user, "second")
    assert [j.name for j in services.waiting_in_order()] == ["first", "second"]
    reasons = plan_round(timezone.now()).waiting[first.pk]
    assert reasons and not any("fair-share" in r for r in reasons)
