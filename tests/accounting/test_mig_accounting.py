"""Accounting of MIG slices: each slice's bookings and tasks are its own daily rows, summed
per slice; a booking of the whole GPU is charged once, on the GPU. A slice has memory
history only (nvidia-smi gives no utilisation or power per slice), so its time is reserved
or unbooked, never used or idle: the figures do not invent what was not measured."""

from datetime import timedelta

import pytest

from accounting import reports, rollup
from accounting.models import DailyUsage
from jobs.models import Job, Task
from monitoring.models import Device, GpuMetric, Host, Resolution
from reservations.models import Reservation, ReservedDevice

from .conftest import DAY, NOW, at


@pytest.fixture
def board(db, owner, other_user, settings):
    """node-1's H100 in MIG mode: owner books slice 1 09:00-11:00, other books the whole GPU
    12:00-13:00 (it draws 300 W then), other's task runs on slice 2 14:00-15:00."""
    settings.MONITORING_HISTORY_STEP = 10
    settings.RESERVATION_IDLE_UTILIZATION = 5
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    gpu = Device.objects.create(host=host, index=0, uuid="GPU-a", mig_enabled=True)
    slices = [
        Device.objects.create(
            host=host, index=0, uuid=f"MIG-{n}", parent=gpu, mig_profile="1g.10gb", mig_index=n
        )
        for n in range(3)
    ]
    for who, device, start, end in ((owner, slices[1], 9, 11), (other_user, gpu, 12, 13)):
        booking = Reservation.objects.create(owner=who, title="b", start=at(start), end=at(end))
        ReservedDevice.objects.create(
            reservation=booking, device=device, start=booking.start, end=booking.end
        )
    task = Task.objects.create(
        job=Job.objects.create(owner=other_user, name="t"), host=host, template="t",
        command="t", status=Task.Status.EXITED, started_at=at(14), ended_at=at(15),
    )  # fmt: skip
    task.devices.set([slices[2]])
    for minute in range(0, 24 * 60, 60):
        time = at(0) + timedelta(minutes=minute)
        GpuMetric.objects.create(device=gpu, step=Resolution.HOUR, time=time, power_w=300)
        GpuMetric.objects.create(
            device=slices[1], step=Resolution.HOUR, time=time, memory_used_mib=5000
        )
    return gpu, slices


def test_each_slice_has_rows_of_its_own_and_the_gpu_its_booking(board, owner, other_user):
    gpu, slices = board
    rollup.compute_day(DAY, NOW)
    rows = {
        (r.device.uuid, r.user.username if r.user else None): (
            r.reserved_seconds, r.unbooked_seconds, r.used_seconds, r.idle_seconds, r.energy_wh
        )
        for r in DailyUsage.objects.filter(day=DAY).select_related("device", "user")
    }  # fmt: skip
    assert rows == {
        ("MIG-1", "owner"): (7200, 0, 0, 0, 0),
        ("GPU-a", "other"): (3600, 0, 0, 0, 300),
        ("GPU-a", None): (0, 0, 0, 0, 23 * 300),
        ("MIG-2", "other"): (0, 3600, 0, 0, 0),
    }


def test_reports_sum_per_gpu_and_slice(board, admin_user, owner):
    rollup.compute_day(DAY, NOW)
    lines = reports.report(admin_user, by="gpu", period="day", start=DAY, end=DAY)
    assert [(line.name, line.reserved_hours, line.unbooked_hours) for line in lines] == [
        ("node-1:0", 1.0, 0),
        ("node-1:0.1 (1g.10gb)", 2.0, 0),
        ("node-1:0.2 (1g.10gb)", 0, 1.0),
    ]
    mine = reports.report(owner, by="gpu", period="day", start=DAY, end=DAY)
    assert [(line.name, line.reserved_hours) for line in mine] == [("node-1:0.1 (1g.10gb)", 2.0)]
