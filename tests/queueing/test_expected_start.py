"""'Why is my job waiting' gives an expected start when only reservations of known end stand
in the way, as Slurm's squeue --start does; none when something of unknown length does."""

from datetime import timedelta

import pytest
from django.utils import timezone

from allocation.rule import when
from queueing.scheduler import plan_round

from .conftest import queue, reserve


def estimate(plan, job) -> str:
    found = [r for r in plan.waiting[job.pk] if r.startswith("expected start")]
    return found[0] if found else ""


@pytest.mark.parametrize("gpus, ends_in", [(1, 1), (2, 2)])
def test_it_is_when_enough_reservations_have_ended(lab, owner, other_user, gpus, ends_in):
    node = lab.host("node-1", gpus=2)
    now = timezone.now()
    reserve(other_user, [lab.gpu(node, 0)], now - timedelta(minutes=5), now + timedelta(hours=1))
    reserve(other_user, [lab.gpu(node, 1)], now - timedelta(minutes=5), now + timedelta(hours=2))
    job = queue(owner, "waits", {"gpu_count": gpus})
    plan = plan_round(now)
    at = when(now + timedelta(hours=ends_in), now)
    assert estimate(plan, job) == (
        f"expected start: about {at}, when the reservations in its way end "
        "(if nothing else takes the GPUs first)"
    )


def test_none_when_a_process_of_unknown_length_is_in_the_way(lab, owner, other_user):
    node = lab.host("node-1", gpus=2)
    now = timezone.now()
    reserve(other_user, [lab.gpu(node, 0)], now - timedelta(minutes=5), now + timedelta(hours=1))
    lab.busy(node, 1)
    job = queue(owner, "waits", {"gpu_count": 2})
    plan = plan_round(now)
    assert plan.waiting[job.pk] and estimate(plan, job) == ""


def test_the_owners_own_reservation_is_no_obstacle(lab, owner, other_user):
    node = lab.host("node-1", gpus=1)
    now = timezone.now()
    reserve(owner, [lab.gpu(node, 0)], now - timedelta(minutes=5), now + timedelta(hours=1))
    job = queue(owner, "fits", {"gpu_count": 2})  # needs 2, the host has 1: never
    assert estimate(plan_round(now), job) == ""
