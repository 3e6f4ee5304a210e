"""The start rule's decisions from what holds a GPU: whose holdings block, over which range,
and what a probe's age does. (Each reason asked through every door: tests/queueing/
test_start_rule.py.)"""

from datetime import timedelta

from django.utils import timezone

from accesscontrol.models import Ban
from allocation.rule import Cluster, may_start
from jobs import services as job_services
from jobs.models import Task
from monitoring.models import Host
from queueing.models import GpuClaim, QueuedJob, QueueRun
from reservations.models import Reservation
from tests.queueing.conftest import lab, queue, reserve, soon  # noqa: F401  (fixture)


def codes(user, gpu, **options) -> set[str]:
    return {reason.code for reason in may_start(user, [gpu], **options)}


def job_on(user, gpu, status=Task.Status.RUNNING, **fields):
    spec = job_services.TaskSpec(host=gpu.host, template="true", devices=[gpu])
    job = job_services.create_job(user, name="theirs", specs=[spec])
    job.tasks.update(status=status, **fields)
    return job


def claimed(user, gpu, state=QueuedJob.State.RUNNING, opportunistic=False) -> QueueRun:
    queued = queue(user, "claimed")
    QueuedJob.objects.filter(pk=queued.pk).update(state=state)
    run = QueueRun.objects.create(
        queued_job=queued, job=job_on(user, gpu, Task.Status.PENDING), gpus=1,
        opportunistic=opportunistic,
    )  # fmt: skip
    GpuClaim.objects.create(device=gpu, run=run)
    return run


def test_the_job_being_started_is_not_in_its_own_way(lab, owner, other_user):  # noqa: F811
    gpu = lab.gpu(lab.host("node-1", gpus=1), 0)
    job = job_on(owner, gpu)
    assert codes(owner, gpu) == {"held_by_task"}
    assert codes(owner, gpu, job=job) == set()  # gpurun's next command in its own job
    run = claimed(other_user, gpu)
    assert codes(other_user, gpu) == {"held_by_task", "held_by_queue_run"}
    assert codes(other_user, gpu, job=run.job) == {"held_by_task"}  # its run; not owner's job


def test_a_task_that_ended_after_the_latest_probe_makes_it_untrusted(lab, owner):  # noqa: F811
    host = lab.host("node-1", gpus=2)
    probed = host.last_probe_at
    job_on(owner, lab.gpu(host, 0), Task.Status.EXITED, ended_at=probed + timedelta(seconds=1))
    job_on(owner, lab.gpu(host, 1), Task.Status.EXITED, ended_at=probed - timedelta(seconds=1))
    assert codes(owner, lab.gpu(host, 0)) == {"stale_probe"}
    assert codes(owner, lab.gpu(host, 1)) == set()  # the probe came after it ended
    # What nvidia-smi showed just now counts instead of the probe (gpurun); a fresh probe.
    assert codes(owner, lab.gpu(host, 0), processes={host.pk: []}) == set()
    Host.objects.filter(pk=host.pk).update(last_probe_at=probed + timedelta(seconds=2))
    assert codes(owner, lab.gpu(host, 0)) == set()


def test_bookings_of_others_block_over_the_range_asked(lab, owner, other_user, settings):  # noqa: F811
    settings.QUEUE_RESERVATION_HORIZON = 30
    host = lab.host("node-1", gpus=3)
    pending, later, mine = (lab.gpu(host, i) for i in range(3))
    reserve(other_user, [pending], soon(-5), soon(60), status=Reservation.Status.PENDING)
    reserve(other_user, [later], soon(45), soon(90))
    reserve(owner, [mine], soon(-5), soon(60))
    assert codes(owner, pending) == {"reserved_by_other"}  # awaiting approval holds it too
    assert codes(owner, later) == set()  # beyond the horizon
    assert codes(owner, later, end=soon(50)) == {"reserved_by_other"}  # before the task stops
    assert codes(owner, mine) == set() and codes(other_user, mine) == {"reserved_by_other"}


def test_only_a_running_opportunistic_run_may_be_preempted(lab, owner, other_user):  # noqa: F811
    host = lab.host("node-1", gpus=3)
    claimed(other_user, lab.gpu(host, 0), opportunistic=True)
    claimed(other_user, lab.gpu(host, 1), QueuedJob.State.STARTING, opportunistic=True)
    run = claimed(other_user, lab.gpu(host, 2))
    gpus = [Cluster(timezone.now()).gpus[lab.gpu(host, i).pk] for i in range(3)]
    assert [gpu.opportunistic_run is not None for gpu in gpus] == [True, False, False]
    assert gpus[2].blocker == f"GPU 2 on node-1 is used by queued job '{run.queued_job}' of other"


def test_waiting_lifts_some_reasons_and_not_others(lab, owner, other_user):  # noqa: F811
    gpu = lab.gpu(lab.host("node-1", gpus=1), 0)
    week = soon(60 * 24 * 7)
    Ban.objects.create(user=owner, reason="a week off", created_by=other_user, until=week)
    [ban] = may_start(owner, [gpu])
    assert (ban.code, ban.lasting) == ("banned", False)  # it ends
    Ban.objects.update(until=None)
    [ban] = may_start(owner, [gpu])
    assert (ban.code, ban.lasting) == ("banned", True)  # only an admin lifts it
    assert may_start(other_user, [gpu]) == []  # a ban is the banned user's alone
