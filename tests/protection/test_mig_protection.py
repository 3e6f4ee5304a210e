"""Protection on MIG slices: the probe puts a process on the slice it runs on (the driver's
instance IDs, tests/monitoring/test_mig.py); a booking of a slice guards that slice, a
booking of the GPU guards all its slices, and a process the driver left on the GPU is not
blamed on a booking of one slice (nothing says which slice it runs on)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from monitoring.models import Device
from protection.detection import check_hosts
from protection.models import Violation
from reservations.services import create_reservation

pytestmark = pytest.mark.usefixtures("no_handlers")


@pytest.fixture
def slices(node):
    """GPU 0 of node-1 in MIG mode, split into two 3g.20gb slices (MIG-0, MIG-1)."""
    gpu = node.devices.get(index=0)
    gpu.mig_enabled = True
    gpu.save()
    return [
        Device.objects.create(
            host=node, index=0, uuid=f"MIG-{n}", parent=gpu, mig_profile="3g.20gb", mig_index=n
        )
        for n in range(2)
    ]


def cycle(probe, *processes):
    """A probe seeing (GPU or slice UUID, pid, user) processes, then a check."""
    probe.saw()
    probe.host.last_snapshot["processes"] = [
        {"gpu_uuid": uuid, "pid": pid, "user": user, "command": "python x.py"}
        for uuid, pid, user in processes
    ]
    probe.host.save()
    check_hosts([probe.host.pk])


def book(owner, devices):
    ensure_default_group()
    start = timezone.now() - timedelta(seconds=30)
    return create_reservation(
        owner, title="mine", devices=devices, start=start, end=start + timedelta(hours=2)
    )


def test_a_booked_slice_is_guarded_and_its_neighbour_is_not(probe, slices, owner, other_user):
    booking = book(owner, [slices[1]])
    cycle(probe)
    cycle(probe, ("MIG-0", 10, "other"), ("MIG-1", 11, "other"), ("MIG-1", 12, "owner"))
    violation = Violation.objects.get()
    assert (violation.device, violation.pid, violation.reservation) == (slices[1], 11, booking)


def test_a_booked_gpu_guards_all_its_slices(probe, slices, owner, other_user):
    booking = book(owner, [slices[0].parent])
    cycle(probe)
    cycle(probe, ("MIG-0", 10, "other"), ("MIG-1", 11, "other"), ("GPU-0", 12, "other"))
    found = Violation.objects.order_by("pid")
    assert [(v.device.uuid, v.pid) for v in found] == [("MIG-0", 10), ("MIG-1", 11), ("GPU-0", 12)]
    assert {v.reservation for v in found} == {booking}


def test_a_process_left_on_the_gpu_is_not_blamed_on_a_slice_booking(probe, slices, owner):
    book(owner, [slices[1]])
    cycle(probe)
    cycle(probe, ("GPU-0", 12, "other"))
    assert not Violation.objects.exists()
