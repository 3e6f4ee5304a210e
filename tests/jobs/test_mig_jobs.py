"""A job on a MIG slice, end to end: a host printing a real H100's MIG layout
(tests/fixtures/nvidia-smi-mig) is probed over the test sshd, a slice is booked, and the job
started on it in GNU screen sees that slice's MIG UUID, and only it, in
CUDA_VISIBLE_DEVICES."""

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from allocation.rule import may_start
from jobs import services
from jobs.models import Task
from jobs.services import TaskSpec, task_env
from monitoring.inventory import probe_and_record
from monitoring.models import Device
from queueing import scheduler
from queueing.services import TaskRequest, enqueue
from reservations.services import create_reservation
from tests.monitoring.conftest import make_host
from tests.realparts import FakeGpus, require

from .conftest import wait_for

H100 = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi-mig" / "h100"
SLICE_2 = "MIG-00000002-0000-0000-0000-000000000002"  # 1g.10gb, as the capture masks it


@pytest.fixture
def mig_node(db, sshd, settings, fake_gpu_root, log_dir):
    """A host at 127.0.0.3 whose nvidia-smi prints the H100's MIG layout, probed once. The
    capture's processes (on MIG device 0) are not of this machine: ps knows no owner."""
    require(shutil.which("screen") is not None, "GNU screen is not installed")
    settings.SSH_CONNECT_TIMEOUT = 3
    FakeGpus(fake_gpu_root, "127.0.0.3").use_capture(H100)
    host = make_host(sshd, "mig-1", "127.0.0.3")
    result = probe_and_record(host)
    assert result.error is None, result.error
    return host


def test_a_job_on_a_booked_slice_sees_only_that_slice(runner, other_user, mig_node, log_dir):
    gpu = Device.objects.get(host=mig_node, parent=None)
    piece = gpu.slices.get(mig_index=2)
    assert (piece.uuid, piece.mig_profile) == (SLICE_2, "1g.10gb")
    now = timezone.now()
    booking = create_reservation(
        runner, title="slice", devices=[piece], start=now, end=now + timedelta(hours=1)
    )
    spec = TaskSpec(
        host=mig_node,
        template='echo "$CUDA_DEVICE_ORDER $CUDA_VISIBLE_DEVICES"',
        devices=[piece],
        reservation=booking,
    )
    task = services.create_job(runner, name="on a slice", specs=[spec]).tasks.get()
    task = services.spawn_task(task, runner)

    def ended() -> bool:
        services.sync_tasks([Task.objects.select_related("host").get(pk=task.pk)])
        task.refresh_from_db()
        return task.status == Task.Status.EXITED

    assert wait_for(ended)
    assert Path(task.log_path).read_text() == f"PCI_BUS_ID {SLICE_2}\n"
    # Meanwhile the whole GPU is nobody else's: the slice's booking and task hold part of it.
    codes = {r.code for r in may_start(other_user, [gpu])}
    assert {"reserved_by_other", "foreign_process"} <= codes


def test_the_slices_are_apart_but_the_gpu_is_not(runner, mig_node):
    """The capture's load runs on MIG device 0: that slice and the GPU are busy, the other
    slices are free."""
    gpu = Device.objects.get(host=mig_node, parent=None)
    busy, *free = gpu.slices.order_by("mig_index")
    assert {r.code for r in may_start(runner, [busy])} == {"foreign_process"}
    [reason] = may_start(runner, [gpu])
    assert reason.code == "foreign_process"
    assert reason.text.startswith("GPU 0.0 (3g.40gb) on mig-1 runs process 21180")
    for piece in free:
        assert may_start(runner, [piece]) == []


def test_a_gpu_booked_whole_runs_on_all_its_slices(runner, mig_node):
    """Booking the GPU in MIG mode holds the board; its task names every slice, since CUDA
    reaches a GPU in MIG mode only through them, and may run under that booking on one."""
    gpu = Device.objects.get(host=mig_node, parent=None)
    now = timezone.now()
    booking = create_reservation(
        runner, title="board", devices=[gpu], start=now, end=now + timedelta(hours=1)
    )
    whole = TaskSpec(host=mig_node, template="true", devices=[gpu], reservation=booking)
    task = services.create_job(runner, name="whole", specs=[whole]).tasks.get()
    slices = [f"MIG-{n:08d}-0000-0000-0000-{n:012d}" for n in range(4)]
    assert task_env(task)["CUDA_VISIBLE_DEVICES"] == ",".join(slices)
    piece = gpu.slices.get(mig_index=3)
    one = TaskSpec(host=mig_node, template="true", devices=[piece], reservation=booking)
    assert services.create_job(runner, name="one", specs=[one]).tasks.get().pk
    other = Device.objects.create(host=mig_node, index=1, uuid="GPU-other")
    with pytest.raises(ValidationError, match="does not book all"):
        spec = TaskSpec(host=mig_node, template="true", devices=[other], reservation=booking)
        services.create_job(runner, name="elsewhere", specs=[spec])


def test_the_queue_starts_a_1g_job_on_a_free_1g_slice(runner, mig_node):
    """'A 1g.10gb slice anywhere', from the queue to the task's environment, for real."""
    task = TaskRequest(
        template='echo "$CUDA_VISIBLE_DEVICES"', kind="any_hosts", mig_profile="1g.10gb"
    )
    queued = enqueue(runner, name="small", tasks=[task])
    scheduler.run_round()
    queued.refresh_from_db()
    assert queued.state == "running", queued.reasons
    [started] = Task.objects.filter(job__queue_run__queued_job=queued)
    assert [str(d) for d in started.devices.all()] == ["mig-1:0.2 (1g.10gb)"]

    def ended() -> bool:
        services.sync_tasks([Task.objects.select_related("host").get(pk=started.pk)])
        started.refresh_from_db()
        return started.status == Task.Status.EXITED

    assert wait_for(ended)
    assert Path(started.log_path).read_text() == f"{SLICE_2}\n"
