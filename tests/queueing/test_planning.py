"""Planning: where waiting jobs go, in which order, and why the others wait.

These tests look at the scheduler's plan (``plan_round``): what it would start and the
reasons it gives, read from the database as the workers see it. Starting for real is in
test_runs.py.
"""

from datetime import timedelta

from django.contrib.auth.models import Group
from django.utils import timezone

from accesscontrol.models import Ban
from jobs import services as job_services
from jobs.models import Task
from jobs.services import TaskSpec
from queueing.models import QueueQuota
from queueing.scheduler import plan_round

from .conftest import map_to_own_name, queue, reserve, soon


def started(plan) -> dict[str, list[list[str]]]:
    """Job name -> per task the GPUs placed, as 'host:index'."""
    from monitoring.models import Device

    names = {d.pk: str(d) for d in Device.objects.select_related("host")}
    return {
        queued.name: [[names[s.device_id] for s in slots] for slots in placed]
        for queued, placed in plan.starts
    }


def reasons(plan, queued) -> list[str]:
    return plan.waiting[queued.pk]


# --- gang start and packing -------------------------------------------------------------------


def test_a_job_is_placed_whole_or_not_at_all(lab, owner):
    node = lab.host("node-1", gpus=4)
    lab.busy(node, 0)
    job = queue(owner, "gang", {"gpu_count": 2}, {"gpu_count": 2})
    plan = plan_round(timezone.now())
    assert job.pk in plan.waiting and not plan.starts  # 3 free GPUs: neither task starts
    assert "together they do not fit" in reasons(plan, job)[0]
    lab.idle(node)
    assert started(plan_round(timezone.now())) == {
        "gang": [["node-1:0", "node-1:1"], ["node-1:2", "node-1:3"]]
    }


def test_best_fit_fills_the_fullest_host_that_fits(lab, owner):
    empty = lab.host("node-1", gpus=4)
    half = lab.host("node-2", gpus=4)
    lab.busy(half, 0)
    lab.busy(half, 1)
    assert empty and started(plan_round(timezone.now())) == {}
    queue(owner, "small", {"gpu_count": 2})
    # node-2 has exactly 2 free: the small job goes there, node-1 stays whole for 4-GPU jobs.
    assert started(plan_round(timezone.now())) == {"small": [["node-2:2", "node-2:3"]]}


def test_small_jobs_leave_whole_hosts_for_a_big_one(lab, owner, other_user):
    lab.host("node-1", gpus=4)
    three = lab.host("node-2", gpus=3)
    lab.busy(three, 0)
    queue(owner, "one", {"gpu_count": 1})
    queue(owner, "two", {"gpu_count": 1})
    queue(other_user, "big", {"gpu_count": 4})
    plan = started(plan_round(timezone.now()))
    assert plan == {
        "one": [["node-2:1"]],
        "two": [["node-2:2"]],
        "big": [["node-1:0", "node-1:1", "node-1:2", "node-1:3"]],
    }


def test_packing_counts_what_earlier_jobs_of_the_round_took(lab, owner, other_user):
    lab.host("node-1", gpus=4)
    lab.host("node-2", gpus=3)
    queue(owner, "three", {"gpu_count": 3})  # best fit: node-2, now full
    queue(owner, "one", {"gpu_count": 1})  # node-1 is all that is left
    queue(other_user, "three more", {"gpu_count": 3})  # node-1's other three
    assert started(plan_round(timezone.now())) == {
        "three": [["node-2:0", "node-2:1", "node-2:2"]],
        "one": [["node-1:0"]],
        "three more": [["node-1:1", "node-1:2", "node-1:3"]],
    }


def test_best_fit_prefers_the_host_a_previous_job_of_the_round_filled(lab, owner):
    big = lab.host("node-1", gpus=4)
    lab.host("node-2", gpus=3)
    named = [lab.gpu(big, 0), lab.gpu(big, 1)]
    queue(owner, "first", {"kind": "devices", "devices": named})
    queue(owner, "second", {"gpu_count": 2})
    # After the first, node-1 has 2 free GPUs left and node-2 3: the second fills node-1.
    assert started(plan_round(timezone.now())) == {
        "first": [["node-1:0", "node-1:1"]],
        "second": [["node-1:2", "node-1:3"]],
    }


def test_any_hosts_uses_the_fewest_hosts(lab, owner):
    lab.host("node-1", gpus=4)
    lab.host("node-2", gpus=2)
    lab.host("node-3", gpus=1)
    queue(owner, "wide", {"kind": "any_hosts", "gpu_count": 5})
    assert started(plan_round(timezone.now())) == {
        "wide": [["node-1:0", "node-1:1", "node-1:2", "node-1:3", "node-3:0"]]
    }


def test_model_and_memory_filters(lab, owner):
    lab.host("t4", gpus=2, model="Tesla T4", memory=15360)
    lab.host("a100", gpus=2, model="NVIDIA A100-SXM4-80GB", memory=81920)
    queue(owner, "big-memory", {"min_memory_mib": 40000})
    queue(owner, "a100", {"gpu_model": "a100"})
    queue(owner, "any")
    assert started(plan_round(timezone.now())) == {
        "big-memory": [["a100:0"]],
        "a100": [["a100:1"]],
        "any": [["t4:0"]],
    }


def test_named_gpus(lab, owner):
    node = lab.host("node-1", gpus=4)
    job = queue(owner, "named", {"kind": "devices", "devices": [lab.gpu(node, 3)]})
    assert started(plan_round(timezone.now())) == {"named": [["node-1:3"]]}
    lab.busy(node, 3, pid=77, user="dave")
    plan = plan_round(timezone.now())
    assert reasons(plan, job) == ["GPU 3 on node-1 runs process 77 of dave"]


def test_two_jobs_are_never_placed_on_one_gpu_in_a_round(lab, owner, other_user):
    node = lab.host("node-1", gpus=1)
    first = queue(owner, "first", {"kind": "devices", "devices": [lab.gpu(node, 0)]})
    second = queue(other_user, "second", {"gpu_count": 1})
    plan = plan_round(timezone.now())
    assert [q.pk for q, _ in plan.starts] == [first.pk]
    assert reasons(plan, second) == [
        "no host has 1 free GPU",
        "GPU 0 on node-1 goes to 'first', ahead in the queue",
    ]


# --- order ------------------------------------------------------------------------------------


def test_priority_then_first_come_first_served(lab, owner, other_user, admin_user):
    lab.host("node-1", gpus=1)
    queue(owner, "early")
    queue(other_user, "late")
    assert started(plan_round(timezone.now())) == {"early": [["node-1:0"]]}
    map_to_own_name(admin_user)
    queue(admin_user, "urgent", priority=5)
    assert started(plan_round(timezone.now())) == {"urgent": [["node-1:0"]]}


# --- reservations and the horizon ---------------------------------------------------------------


def test_another_users_reservation_within_the_horizon_blocks(lab, owner, other_user, settings):
    settings.QUEUE_RESERVATION_HORIZON = 30
    node = lab.host("node-1", gpus=1)
    start = soon(20)
    reserve(other_user, [lab.gpu(node, 0)], start, start + timedelta(hours=2))
    job = queue(owner, "blocked")
    plan = plan_round(timezone.now())
    local = timezone.localtime(start)
    assert reasons(plan, job) == [
        "no host has 1 free GPU",
        f"GPU 0 on node-1 reserved by other from {local:%H:%M}",
    ] or reasons(plan, job)[1].endswith(f"{local:%H:%M}")  # the next day shows the date


def test_a_reservation_beyond_the_horizon_does_not_block(lab, owner, other_user, settings):
    settings.QUEUE_RESERVATION_HORIZON = 30
    node = lab.host("node-1", gpus=1)
    reserve(other_user, [lab.gpu(node, 0)], soon(45), soon(120))
    queue(owner, "fits")
    assert started(plan_round(timezone.now())) == {"fits": [["node-1:0"]]}
    settings.QUEUE_RESERVATION_HORIZON = 60  # configurable: now it is within the horizon
    assert started(plan_round(timezone.now())) == {}


def test_the_owners_own_reservation_does_not_block(lab, owner, settings):
    node = lab.host("node-1", gpus=1)
    reserve(owner, [lab.gpu(node, 0)], soon(10), soon(100))
    queue(owner, "mine")
    assert started(plan_round(timezone.now())) == {"mine": [["node-1:0"]]}


def test_a_reservation_running_now_blocks_others_with_its_end(lab, owner, other_user):
    node = lab.host("node-1", gpus=1)
    end = soon(90)
    reserve(other_user, [lab.gpu(node, 0)], soon(-10), end)
    job = queue(owner, "later")
    assert reasons(plan_round(timezone.now()), job)[1].startswith(
        "GPU 0 on node-1 reserved by other until"
    )


# --- quota and opportunistic jobs ---------------------------------------------------------------


def lab_group(*users, max_gpus=2, max_priority=0) -> Group:
    group = Group.objects.create(name="lab-a")
    group.user_set.add(*users)
    QueueQuota.objects.create(group=group, max_gpus=max_gpus, max_priority=max_priority)
    return group


def test_group_quota_limits_concurrent_queue_gpus(lab, owner, other_user):
    lab.host("node-1", gpus=4)
    lab_group(owner, other_user, max_gpus=2)
    queue(owner, "a", {"gpu_count": 2})
    over = queue(other_user, "b", {"gpu_count": 1})
    plan = plan_round(timezone.now())
    assert list(started(plan)) == ["a"]
    assert reasons(plan, over) == [
        "group quota reached: lab-a holds 2 of its 2 GPUs, this job needs 1"
    ]


def test_opportunistic_jobs_run_beyond_the_quota_on_spare_gpus(lab, owner):
    lab.host("node-1", gpus=4)
    lab_group(owner, max_gpus=1)
    queue(owner, "guaranteed", {"gpu_count": 1})
    queue(owner, "extra", {"gpu_count": 2}, opportunistic=True)
    assert started(plan_round(timezone.now())) == {
        "guaranteed": [["node-1:0"]],
        "extra": [["node-1:1", "node-1:2"]],
    }


def test_priority_is_limited_per_group(lab, owner):
    import pytest
    from django.core.exceptions import ValidationError

    lab_group(owner, max_priority=3)
    queue(owner, "ok", priority=3)
    with pytest.raises(ValidationError, match="between -100 and 3 in lab-a"):
        queue(owner, "too high", priority=4)


# --- other reasons ----------------------------------------------------------------------------


def test_reasons_name_the_missing_model(lab, owner):
    lab.host("node-1", gpus=2, model="Tesla T4")
    job = queue(owner, "a100s", {"gpu_count": 4, "gpu_model": "A100"})
    assert reasons(plan_round(timezone.now()), job) == ["no host has 4 GPUs of model A100"]


def test_reasons_for_a_busy_model(lab, owner):
    node = lab.host("node-1", gpus=4, model="NVIDIA A100-SXM4-40GB")
    lab.busy(node, 1, pid=9, user="erin")
    job = queue(owner, "a100s", {"gpu_count": 4, "gpu_model": "A100"})
    assert reasons(plan_round(timezone.now()), job) == [
        "no host has 4 free GPUs of model A100",
        "GPU 1 on node-1 runs process 9 of erin",
    ]


def test_reasons_for_a_banned_owner_and_a_down_host(lab, owner, admin_user):
    lab.host("node-1", gpus=1)
    down = lab.host("node-2", gpus=1)
    down.status = down.Status.UNREACHABLE
    down.save()
    Ban.objects.create(user=owner, reason="misuse", created_by=admin_user)
    job = queue(owner, "x", {"gpu_count": 1})
    why = reasons(plan_round(timezone.now()), job)
    assert why[0] == "no host has 1 free GPU"
    assert "node-2 is unreachable" in why
    assert any("owner is banned" in r and "misuse" in r for r in why)


def test_a_probe_older_than_the_last_task_end_is_not_trusted(lab, owner):
    node = lab.host("node-1", gpus=1)
    spec = TaskSpec(host=node, template="true", devices=[lab.gpu(node, 0)])
    task = job_services.create_job(owner, name="earlier", specs=[spec]).tasks.get()
    # It ended after the host's latest probe, which may still show its processes.
    Task.objects.filter(pk=task.pk).update(
        status=Task.Status.EXITED, exit_code=0, ended_at=timezone.now()
    )
    job = queue(owner, "after")
    assert reasons(plan_round(timezone.now()), job) == [
        "no host has 1 free GPU",
        "waiting for a fresh probe of node-1",
    ]
    lab.idle(node)  # probed again since
    assert started(plan_round(timezone.now())) == {"after": [["node-1:0"]]}


def test_a_start_interrupted_midway_is_undone_by_a_later_round(lab, owner):
    """A worker that died between claiming the GPUs and spawning leaves a "starting" job;
    once no round can still be running, the next round fails its tasks and requeues it."""
    from datetime import timedelta

    from queueing import scheduler
    from queueing.models import GpuClaim, QueuedJob, QueueRun

    lab.host("node-1", gpus=1)
    job = queue(owner, "half started")
    ((queued, placed),) = plan_round(timezone.now()).starts
    run = scheduler.claim(queued, placed)  # ...and the worker died here
    scheduler.run_round()
    job.refresh_from_db()
    assert job.state == QueuedJob.State.STARTING  # it may still be starting: left alone
    QueueRun.objects.filter(pk=run.pk).update(
        started_at=timezone.now() - timedelta(seconds=scheduler.lease_seconds() + 1)
    )
    scheduler.close_ended_runs()
    job.refresh_from_db()
    assert job.state == QueuedJob.State.WAITING and job.start_failures == 1
    assert "its start was interrupted" in job.reasons[0]
    assert Task.objects.get(job=run.job).status == Task.Status.FAILED
    assert not GpuClaim.objects.exists()
