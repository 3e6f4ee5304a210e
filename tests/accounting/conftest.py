"""A small history, written as the monitoring loop stores it, with hand-computed figures.

Day D = 2026-03-10 (UTC site zone); node-1 has GPUs 0 and 1.

- GPU 0: owner's booking from D 22:00 to D+1 02:00 (it crosses midnight). Minute samples
  from 22:00: 60 at 80 % and 200 W, then 60 at 0 % and 50 W; none after midnight.
  D: reserved 2 h, used 1 h, idle 1 h, 200 + 50 = 250 Wh. D+1: reserved 2 h, nothing else.
- GPU 1: nobody's booking; other's job task ran 09:00-10:30 (1.5 h unbooked). Hour samples
  at 10:00 and 12:00 (11:00 is missing: a gap) at 50 % and 100 W, and raw samples at
  12:30:00..12:31:00 (7, 10 s each) at 50 % and 100 W. The raw tier wins from 12:30, so the
  12:00 hour is dropped. The 10:00 hour is cut where the task ended: other gets 10:00-10:30
  (0.5 h used, 50 Wh), nobody 10:30-11:00 and the 70 raw seconds (1870 s, 50 + 70/36 Wh).
"""

from datetime import UTC, date, datetime, timedelta

import pytest

from jobs.models import Job, Task
from monitoring.models import Device, GpuMetric, Host, Resolution
from reservations.models import Reservation, ReservedDevice

DAY = date(2026, 3, 10)
NOW = datetime(2026, 3, 12, 8, 0, tzinfo=UTC)


def at(hour, minute=0, second=0, day=DAY):
    return datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=UTC)


def sample(device, step, time, utilization, power):
    GpuMetric.objects.create(
        device=device, step=step, time=time, utilization_gpu=utilization, power_w=power
    )


@pytest.fixture
def history(db, owner, other_user, settings):
    settings.MONITORING_HISTORY_STEP = 10
    settings.RESERVATION_IDLE_UTILIZATION = 5
    settings.ACCOUNTING_EMISSION_G_PER_KWH = 350
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    gpu0, gpu1 = (Device.objects.create(host=host, index=i, uuid=f"GPU-{i}") for i in range(2))
    booking = Reservation.objects.create(
        owner=owner, title="night", start=at(22), end=at(2, day=date(2026, 3, 11))
    )
    ReservedDevice.objects.create(
        reservation=booking, device=gpu0, start=booking.start, end=booking.end
    )
    for minute in range(120):
        busy = minute < 60
        sample(gpu0, Resolution.MINUTE, at(22) + timedelta(minutes=minute),
               80 if busy else 0, 200 if busy else 50)  # fmt: skip
    job = Job.objects.create(owner=other_user, name="train")
    task = Task.objects.create(
        job=job, host=host, template="t", command="t", status=Task.Status.EXITED,
        started_at=at(9), ended_at=at(10, 30),
    )  # fmt: skip
    task.devices.set([gpu1])
    for hour in (10, 12):
        sample(gpu1, Resolution.HOUR, at(hour), 50, 100)
    for i in range(7):
        sample(gpu1, Resolution.RAW, at(12, 30, 0) + timedelta(seconds=10 * i), 50, 100)
    return gpu0, gpu1
