"""Queued jobs started, stopped and requeued for real: tasks in GNU screen over the test sshd.

Rounds are run directly (``run_round``), as the django-q workers run them after each
monitoring cycle; the hosts are probed for real through the fake nvidia-smi.
"""

import sys
import threading

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone

from allocation.placement import Slot
from jobs.models import Task
from notifications.send import send_due
from queueing import scheduler
from queueing.models import GpuClaim, QueuedJob, QueueQuota, QueueRun

from .conftest import probe_again, queue, reserve, soon, wait_for

State = QueuedJob.State
LONG = f"{sys.executable} -c 'import time; time.sleep(600)'"


def stop_notices(smtp) -> list[str]:
    """The bodies of the 'queued job stopped' mails, sent as the notifications sender does."""
    send_due()
    return [body for _, subject, body in smtp.mails() if subject.endswith("' stopped")]


def state(queued) -> str:
    queued.refresh_from_db()
    return queued.state


def tasks_of(queued) -> list[Task]:
    return list(Task.objects.filter(job__queue_run__queued_job=queued).order_by("pk"))


def round_until(predicate, nodes, timeout=30):
    """Run rounds (probing first, as the monitoring loop does) until predicate() holds."""

    def step():
        probe_again(*nodes)
        scheduler.run_round()
        return predicate()

    return wait_for(step, timeout=timeout, step=0.3)


def test_a_queued_job_starts_on_all_its_hosts_at_once(runner, real_nodes):
    job = queue(runner, "wide", {"kind": "any_hosts", "gpu_count": 4, "template": LONG})
    scheduler.run_round()
    assert state(job) == State.RUNNING
    tasks = tasks_of(job)
    assert [(t.host.name, t.status) for t in tasks] == [
        ("node-2", Task.Status.RUNNING),
        ("node-3", Task.Status.RUNNING),
    ]
    assert tasks[0].env["HIVE_NODE_RANK"] == "0" and tasks[1].env["HIVE_NNODES"] == "2"
    assert GpuClaim.objects.filter(run__queued_job=job).count() == 4


def test_a_start_that_fails_on_one_host_is_undone_on_all(runner, real_nodes):
    node2, node3 = real_nodes
    job = queue(runner, "gang", {"kind": "any_hosts", "gpu_count": 4, "template": LONG})
    node3.port = 1  # nothing listens there: the second task cannot start
    node3.save()
    scheduler.run_round()
    first, second = tasks_of(job)
    assert second.status == Task.Status.FAILED
    assert first.status in (Task.Status.STOPPING, Task.Status.KILLED)  # killed at once
    assert state(job) == State.WAITING and job.start_failures == 1
    assert job.reasons[0].startswith("could not start (1 of 3 tries)")
    assert round_until(lambda: not GpuClaim.objects.exists(), [node2])
    first.refresh_from_db()
    assert first.status == Task.Status.KILLED
    assert QueueRun.objects.get().outcome == QueueRun.Outcome.START_FAILED


def test_a_reservation_stops_the_job_before_it_starts_and_requeues_it(
    runner, other_user, real_nodes, settings, smtp
):
    settings.QUEUE_PREEMPT_LEAD_SECONDS = 120
    settings.JOBS_STOP_GRACE_SECONDS = 5
    node2, node3 = real_nodes
    job = queue(
        runner,
        "night run",
        {"kind": "devices", "devices": list(node2.devices.all()), "template": LONG},
    )
    scheduler.run_round()
    assert state(job) == State.RUNNING, job.reasons
    start = soon(1.5)
    reserve(other_user, [node2.devices.get(index=1)], start, soon(120))
    scheduler.run_round()
    assert state(job) == State.STOPPING
    assert "GPU 1 on node-2 is reserved by other from" in job.stop_reason
    assert [t.status for t in tasks_of(job)] == [Task.Status.STOPPING]
    (notice,) = stop_notices(smtp)
    assert "goes back to the queue" in notice and "is being stopped: GPU 1 on node-2" in notice
    assert round_until(lambda: state(job) == State.WAITING, real_nodes)
    assert [t.status for t in tasks_of(job)] == [Task.Status.KILLED]
    # The reservation is within the horizon: it waits, and says why.
    assert job.stop_reason.startswith("GPU 1 on node-2 is reserved by other from")
    local = timezone.localtime(start)
    assert f"GPU 1 on node-2 reserved by other from {local:%H:%M}" in job.reasons


def test_a_job_that_should_not_be_requeued_ends_preempted(runner, other_user, real_nodes, smtp):
    node2, _ = real_nodes
    job = queue(
        runner,
        "once",
        {"kind": "devices", "devices": [node2.devices.get(index=0)], "template": LONG},
        requeue_on_preemption=False,
    )
    scheduler.run_round()
    reserve(other_user, [node2.devices.get(index=0)], soon(0.5), soon(60))
    scheduler.run_round()
    assert "You asked not to requeue it" in stop_notices(smtp)[0]
    assert round_until(lambda: state(job) == State.PREEMPTED, real_nodes)


def test_the_owners_own_reservation_does_not_stop_their_job(runner, real_nodes, smtp):
    node2, _ = real_nodes
    job = queue(
        runner,
        "mine",
        {"kind": "devices", "devices": [node2.devices.get(index=0)], "template": LONG},
    )
    scheduler.run_round()
    reserve(runner, [node2.devices.get(index=0)], soon(0.5), soon(60))
    scheduler.run_round()
    assert state(job) == State.RUNNING and not stop_notices(smtp)


def test_a_job_that_ends_frees_its_gpus_for_the_next(runner, real_nodes):
    node2, _ = real_nodes
    gpu = [node2.devices.get(index=0)]
    first = queue(runner, "first", {"kind": "devices", "devices": gpu, "template": "exit 3"})
    second = queue(runner, "second", {"kind": "devices", "devices": gpu, "template": LONG})
    scheduler.run_round()
    assert state(first) == State.RUNNING and state(second) == State.WAITING
    assert round_until(lambda: state(second) == State.RUNNING, real_nodes)
    assert state(first) == State.FAILED  # exit code 3
    assert not GpuClaim.objects.filter(run__queued_job=first).exists()


def test_opportunistic_jobs_are_preempted_for_jobs_within_quota(
    runner, other_runner, real_nodes, settings
):
    other_user = other_runner
    settings.JOBS_STOP_GRACE_SECONDS = 5
    lab_a, lab_b = Group.objects.create(name="lab-a"), Group.objects.create(name="lab-b")
    lab_a.user_set.add(runner)
    lab_b.user_set.add(other_user)
    QueueQuota.objects.create(group=lab_a, max_gpus=2)
    QueueQuota.objects.create(group=lab_b, max_gpus=2)
    mine = queue(runner, "mine", {"gpu_count": 2, "template": LONG})
    extra = queue(runner, "extra", {"gpu_count": 2, "template": LONG}, opportunistic=True)
    over = queue(runner, "over quota", {"gpu_count": 1, "template": LONG})
    scheduler.run_round()
    assert state(mine) == State.RUNNING and state(extra) == State.RUNNING
    over.refresh_from_db()
    assert over.reasons == ["group quota reached: lab-a holds 2 of its 2 GPUs, this job needs 1"]
    theirs = queue(other_user, "theirs", {"gpu_count": 2, "template": LONG})
    scheduler.run_round()
    assert state(extra) == State.STOPPING and state(mine) == State.RUNNING
    theirs.refresh_from_db()
    assert theirs.reasons[0].startswith("waiting for opportunistic jobs to stop on GPU 0 on")
    assert round_until(lambda: state(theirs) == State.RUNNING, real_nodes)
    assert state(extra) == State.WAITING  # requeued, behind the guaranteed jobs


# --- two rounds at once -----------------------------------------------------------------------


def in_threads(*functions):
    """Run the functions at the same moment, each in its own thread and DB connection."""
    barrier, results = threading.Barrier(len(functions)), [None] * len(functions)

    def run(i, function):
        try:
            barrier.wait()
            results[i] = function()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


@pytest.mark.django_db(transaction=True)
def test_two_rounds_that_planned_one_gpu_start_only_one_job(runner, other_runner, real_nodes):
    other_user = other_runner
    node2, _ = real_nodes
    gpu = node2.devices.get(index=0)
    slot = Slot(gpu.pk, node2.pk, 0, gpu.name)
    one = queue(runner, "one", {"gpu_count": 1, "template": LONG})
    two = queue(other_user, "two", {"gpu_count": 1, "template": LONG})
    # Each round planned its job onto the same free GPU; both now start at the same moment.
    runs = in_threads(
        lambda: scheduler.start_job(one, [[slot]]), lambda: scheduler.start_job(two, [[slot]])
    )
    assert sum(run is not None for run in runs) == 1
    assert GpuClaim.objects.filter(device=gpu).count() == 1
    loser = two if runs[0] else one
    assert state(loser) == State.WAITING and "taken by another scheduler" in loser.reasons[0]
    assert Task.objects.filter(devices=gpu).count() == 1  # the loser created no task at all


@pytest.mark.django_db(transaction=True)
def test_two_dispatchers_at_once_never_share_a_gpu(runner, real_nodes):
    jobs = [queue(runner, f"job {i}", {"gpu_count": 1, "template": LONG}) for i in range(6)]
    summaries = in_threads(scheduler.dispatch, scheduler.dispatch)
    assert len(summaries) == 2
    running = [j for j in jobs if state(j) == State.RUNNING]
    assert len(running) == 4  # 4 GPUs, each to one job
    claimed = list(GpuClaim.objects.values_list("device", flat=True))
    assert len(claimed) == len(set(claimed)) == 4
    per_gpu = [list(Task.objects.filter(devices=d, status__in=Task.ACTIVE)) for d in claimed]
    assert all(len(tasks) == 1 for tasks in per_gpu)


# --- the whole story ----------------------------------------------------------------------------


def test_a_queued_4_gpu_job_waits_starts_is_stopped_for_a_reservation_and_requeued(
    client, runner, other_user, real_nodes, gpus, real_processes, settings, smtp
):
    """Queued in the evening, it says why it waits, starts when the GPUs free, is stopped
    and requeued before the morning's reservation, and says why it waits again."""
    settings.JOBS_STOP_GRACE_SECONDS = 5
    node2, node3 = real_nodes
    client.force_login(runner)
    squatter = real_processes(["sleep", "120"])
    gpus("127.0.0.3").set_processes([f"GPU-node-3-0, {squatter.pid}, 500, sleep"])
    probe_again(node3)
    job = queue(runner, "night run", {"kind": "any_hosts", "gpu_count": 4, "template": LONG})
    scheduler.run_round()
    page = client.get("/queue/").content.decode()
    assert "the hosts together do not have 4 free GPUs" in page
    assert f"GPU 0 on node-3 runs process {squatter.pid} of " in page

    gpus("127.0.0.3").set_processes([])  # the other user's process ended
    assert round_until(lambda: state(job) == State.RUNNING, real_nodes)
    page = client.get("/queue/").content.decode()
    assert "Running from the queue" in page and "night run" in page

    start = soon(1.5)
    reserve(other_user, [node2.devices.get(index=0)], start, soon(600))
    scheduler.run_round()
    assert state(job) == State.STOPPING and stop_notices(smtp)
    assert round_until(lambda: state(job) == State.WAITING, real_nodes)
    page = client.get("/queue/").content.decode()
    local = timezone.localtime(start)
    assert "Requeued after it was stopped: GPU 0 on node-2 is reserved by other from" in page
    assert f"GPU 0 on node-2 reserved by other from {local:%H:%M}" in page
    assert all(t.status == Task.Status.KILLED for t in tasks_of(job))


def test_cancelling_a_running_job_hands_its_stops_to_the_workers(client, runner, real_nodes):
    """The cancel answers without reaching a host; the workers send the SIGTERMs."""
    from tests.workers import discard_queued, run_queued

    discard_queued()  # what earlier tests left on the broker is not this test's work
    job = queue(runner, "cancel me", {"template": LONG})
    scheduler.run_round()
    assert state(job) == State.RUNNING
    client.force_login(runner)
    assert client.post(f"/queue/{job.pk}/cancel").status_code == 302
    assert state(job) == State.STOPPING
    (task,) = tasks_of(job)
    assert task.status == Task.Status.STOPPING and task.stop_requested_at is None  # not sent
    assert run_queued() >= 1
    task.refresh_from_db()
    assert task.stop_requested_at is not None and task.kill_at is not None  # SIGTERM sent
    assert round_until(lambda: state(job) == State.CANCELLED, real_nodes)
    assert Task.objects.get(pk=task.pk).status == Task.Status.KILLED
