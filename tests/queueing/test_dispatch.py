"""What makes the scheduler run, and what happens when a round fails."""

import pytest
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.signing import SignedPackage

from core.models import Activity
from monitoring.signals import cycle_finished
from queueing import scheduler
from queueing.models import QueuedJob
from tests.workers import discard_queued

from .conftest import queue, reserve, soon


def queued_functions() -> list[str]:
    broker = get_broker()
    names = []
    while (task := broker.dequeue()) is not None:
        for _, package in task:
            names.append(SignedPackage.loads(package)["func"])
    return names


@pytest.fixture
def empty_broker(db):
    # Whatever earlier tests left (Redis keeps it, maybe signed by another process's key).
    discard_queued()


def test_a_cycle_queues_a_round_only_while_the_queue_has_work(lab, owner, empty_broker):
    node = lab.host("node-1", gpus=1)
    cycle_finished.send(sender=None, host_ids=[node.pk], finished_at=timezone.now())
    assert "queueing.scheduler.dispatch" not in queued_functions()
    queue(owner, "waiting")
    queued_functions()
    cycle_finished.send(sender=None, host_ids=[node.pk], finished_at=timezone.now())
    assert queued_functions().count("queueing.scheduler.dispatch") == 1


@pytest.mark.django_db(transaction=True)
def test_queue_and_reservation_changes_queue_a_round(lab, owner, other_user):
    node = lab.host("node-1", gpus=1)
    discard_queued()
    job = queue(owner, "new")
    assert "queueing.scheduler.dispatch" in queued_functions()
    reserve(other_user, [lab.gpu(node, 0)], soon(10), soon(100))
    assert "queueing.scheduler.dispatch" in queued_functions()
    QueuedJob.objects.filter(pk=job.pk).update(state=QueuedJob.State.CANCELLED)
    reserve(other_user, [lab.gpu(node, 0)], soon(200), soon(300))
    assert "queueing.scheduler.dispatch" not in queued_functions()  # nothing to do


def test_a_round_saves_why_each_job_waits(lab, owner, other_user):
    node = lab.host("node-1", gpus=1)
    reserve(other_user, [lab.gpu(node, 0)], soon(5), soon(100))
    job = queue(owner, "blocked")
    summary = scheduler.dispatch()
    assert summary == "0 runs ended, 0 preempted, 0 started, 1 waiting"
    job.refresh_from_db()
    assert job.reasons[1].startswith("GPU 0 on node-1 reserved by other from")
    assert job.reasons_at is not None
    assert Activity.objects.get(name=scheduler.ACTIVITY).last_summary == summary


def test_a_job_that_cannot_be_started_is_recorded_and_the_others_still_start(runner, real_nodes):
    broken = queue(runner, "broken", {"template": "sleep 30"})
    # A row edited by hand (say, raw JSON in the admin) that no service would have written.
    broken.tasks.update(env="not an object")
    fine = queue(runner, "fine", {"template": "sleep 30"})
    assert "1 started" in scheduler.dispatch()
    activity = Activity.objects.get(name=scheduler.ACTIVITY)
    assert "starting 'broken': TypeError" in activity.last_error
    assert activity.holder == ""  # the lease was given back
    broken.refresh_from_db()
    fine.refresh_from_db()
    assert broken.state == QueuedJob.State.WAITING and not broken.runs.exists()  # no half start
    assert fine.state == QueuedJob.State.RUNNING


def test_a_dispatcher_finding_the_lease_taken_leaves_the_round_to_its_holder(lab, owner):
    from core import lease

    queue(owner, "x")
    assert lease.acquire(scheduler.ACTIVITY, "someone else", 60)
    before = scheduler.requested()
    assert scheduler.dispatch().startswith("another dispatcher is running")
    assert scheduler.requested() == before + 1  # the holder sees the request and runs again
