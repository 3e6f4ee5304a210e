"""The queue and MIG slices: "a 1g.10gb slice anywhere" takes a free slice of that profile;
"a GPU" takes a whole GPU, never a slice nor a GPU in MIG mode; a GPU and its slices share
hardware in one round as they do in the start rule."""

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from allocation.placement import Pool, Request, Slot, place_request
from monitoring.models import Device, Host
from queueing.models import QueuedTask
from queueing.scheduler import plan_round

from .conftest import queue, reserve, snapshot, soon
from .test_planning import reasons, started

ONE_G = {"kind": "any_hosts", "mig_profile": "1g.10gb"}


def split(host: Host, profiles=("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")) -> Device:
    """GPU 0 of ``host`` in MIG mode, split into ``profiles`` (as a probe records it)."""
    gpu = host.devices.get(index=0)
    gpu.mig_enabled = True
    gpu.save()
    for n, profile in enumerate(profiles):
        Device.objects.create(
            host=host,
            index=0,
            uuid=f"{host.name}-MIG-{n}",
            name=gpu.name,
            parent=gpu,
            mig_profile=profile,
            mig_index=n,
            memory_total_mib=int(profile.split(".")[1][:-2]) * 1000,
        )
    host.last_snapshot = snapshot(host)
    host.save()
    return gpu


@pytest.fixture
def mig_lab(lab):
    """mig-1: an H100 in MIG mode (3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb); node-2: two A100s."""
    mig = lab.host("mig-1", gpus=1, model="NVIDIA H100 80GB HBM3", memory=81559)
    split(mig)
    lab.host("node-2", gpus=2)
    return mig


def test_a_profile_request_matches_only_slices_of_that_profile():
    gpu = Slot(1, 1, 0, "A100")
    board = Slot(2, 1, 1, "H100", partitioned=True)
    small = Slot(3, 1, 1, "H100", 10000, mig_profile="1g.10gb")
    big = Slot(4, 1, 1, "H100", 40000, mig_profile="3g.40gb")
    by_profile = Request("any_hosts", mig_profile="1g.10gb")
    assert [s.device_id for s in (gpu, board, small, big) if by_profile.matches(s)] == [3]
    whole = Request("any_hosts")
    assert [s.device_id for s in (gpu, board, small, big) if whole.matches(s)] == [1]
    named = Request("devices", device_ids=(2, 4))
    assert [s.device_id for s in (gpu, board, small, big) if named.matches(s)] == [2, 4]
    pool = Pool({s.device_id: s for s in (gpu, board, small, big)})
    assert place_request(Request("one_host", count=2, mig_profile="1g.10gb"), pool) is None


def test_a_1g_slice_anywhere_is_placed_on_one(mig_lab, owner, other_user):
    queue(owner, "small", ONE_G)
    queue(other_user, "also small", ONE_G)
    queue(owner, "a GPU", {"gpu_count": 1})
    assert started(plan_round(timezone.now())) == {
        "small": [["mig-1:0.2 (1g.10gb)"]],
        "also small": [["mig-1:0.3 (1g.10gb)"]],
        "a GPU": [["node-2:0"]],
    }


def test_a_gpu_in_mig_mode_is_never_placed_as_a_gpu(mig_lab, lab, owner):
    node = Host.objects.get(name="node-2")
    lab.busy(node, 0)
    lab.busy(node, 1)
    job = queue(owner, "whole", {"gpu_count": 1, "kind": "any_hosts"})
    plan = plan_round(timezone.now())
    assert not plan.starts
    assert reasons(plan, job)[0] == "the hosts together do not have 1 free GPU"


def test_slices_taken_by_others_are_not_placed_on(mig_lab, owner, other_user):
    gpu = mig_lab.devices.get(parent=None)
    slices = {d.mig_index: d for d in gpu.slices.all()}
    # Someone's process runs on slice 2, and slice 3 is booked by someone else.
    mig_lab.last_snapshot = snapshot(mig_lab, [(slices[2].uuid, 4242, "carol")])
    mig_lab.save()
    reserve(other_user, [slices[3]], soon(-5), soon(60))
    job = queue(owner, "small", ONE_G)
    plan = plan_round(timezone.now())
    assert not plan.starts
    why = " ".join(reasons(plan, job))
    assert "1 free MIG 1g.10gb slice" in why
    assert "GPU 0.2 (1g.10gb) on mig-1 runs process 4242" in why
    assert "GPU 0.3 (1g.10gb) on mig-1 reserved by other" in why


def test_a_booking_of_the_gpu_holds_all_its_slices(mig_lab, owner, other_user):
    gpu = mig_lab.devices.get(parent=None)
    reserve(other_user, [gpu], soon(-5), soon(60))
    job = queue(owner, "small", ONE_G)
    plan = plan_round(timezone.now())
    assert not plan.starts and "reserved by other" in " ".join(reasons(plan, job))
    # Its owner's own jobs run on the slices of the GPU they booked.
    queue(other_user, "mine", ONE_G)
    assert started(plan_round(timezone.now())) == {"mine": [["mig-1:0.2 (1g.10gb)"]]}


def test_the_gpu_and_its_slices_are_not_given_twice_in_one_round(mig_lab, owner, other_user):
    gpu = mig_lab.devices.get(parent=None)
    first = queue(owner, "board", {"kind": "devices", "devices": [gpu]})
    second = queue(other_user, "small", ONE_G)
    plan = plan_round(timezone.now())
    assert started(plan) == {"board": [["mig-1:0"]]}
    assert first.pk not in plan.waiting
    assert "goes to 'board', ahead in the queue" in " ".join(reasons(plan, second))


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ({**ONE_G, "mig_profile": "small"}, "Enter a MIG profile"),
        ({"kind": "devices", "mig_profile": "1g.10gb"}, "name them"),
    ],
)
def test_a_bad_profile_request_is_refused_clearly(mig_lab, owner, task, message):
    if task["kind"] == "devices":
        task = {**task, "devices": list(mig_lab.devices.filter(mig_profile="1g.10gb"))}
    with pytest.raises(ValidationError, match=message):
        queue(owner, "bad", task)
    assert not QueuedTask.objects.exists()


def test_the_task_says_what_it_asks_for(mig_lab, owner):
    job = queue(owner, "small", {**ONE_G, "gpu_count": 2})
    assert job.tasks.get().describe() == "2 MIG 1g.10gb slices on any hosts"
