"""Benchmark: one day of accounting figures for 10 hosts x 8 GPUs.

Fills a fresh SQLite database (temporary data dir) with one full day of minute samples per
GPU (115,200 rows; the tier a day older than the raw retention is figured from), 20 users
each holding 2-4 GPUs in four 3-hour bookings, and a job task per host, then times
``rollup.compute_day`` (what the 15-minute schedule runs for yesterday and today) and the
month report per user over the rows it wrote.

Run: .venv/bin/python bench/accounting_rollup.py
"""

import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["HIVE_DATA_DIR"] = tempfile.mkdtemp(prefix="hive-bench-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from accounting import reports, rollup  # noqa: E402
from jobs.models import Job, Task  # noqa: E402
from monitoring.models import Device, GpuMetric, Host, Resolution  # noqa: E402
from reservations.models import Reservation, ReservedDevice  # noqa: E402

HOSTS, GPUS, USERS, RUNS = 10, 8, 20, 5
DAY = date(2026, 3, 10)
START = datetime(2026, 3, 10, tzinfo=UTC)


def populate() -> None:
    rng = random.Random(1)
    users = [get_user_model().objects.create_user(f"u{i}") for i in range(USERS)]
    devices = []
    for h in range(HOSTS):
        host = Host.objects.create(name=f"node-{h}", address=f"10.0.0.{h + 1}")
        devices += [
            Device.objects.create(host=host, index=i, uuid=f"G{h}-{i}") for i in range(GPUS)
        ]
        job = Job.objects.create(owner=rng.choice(users), name="train")
        task = Task.objects.create(job=job, host=host, template="t", command="t",
                                   started_at=START + timedelta(hours=20), status="exited",
                                   ended_at=START + timedelta(hours=23))  # fmt: skip
        task.devices.set(devices[-2:])
    for block in range(4):
        since = START + timedelta(hours=3 * block)
        free = list(devices)
        rng.shuffle(free)
        for user in users:
            take, free = free[: rng.randint(2, 4)], free[4:]
            if not take:
                break
            booking = Reservation.objects.create(owner=user, title="b", start=since,
                                                 end=since + timedelta(hours=3))  # fmt: skip
            ReservedDevice.objects.bulk_create(
                ReservedDevice(reservation=booking, device=d, start=since, end=booking.end)
                for d in take
            )
    for device in devices:
        GpuMetric.objects.bulk_create(
            GpuMetric(device=device, step=Resolution.MINUTE, time=START + timedelta(minutes=m),
                      utilization_gpu=rng.choice([0, 0, 40, 95]), power_w=rng.uniform(30, 300))
            for m in range(24 * 60)
        )  # fmt: skip


def main() -> None:
    call_command("migrate", verbosity=0)
    populate()
    now = START + timedelta(days=2)
    timings, rows = [], 0
    for _ in range(RUNS):
        began = time.perf_counter()
        rows = rollup.compute_day(DAY, now)
        timings.append(time.perf_counter() - began)
    admin = get_user_model().objects.create_superuser("boss")
    began = time.perf_counter()
    lines = reports.report(admin, by="user", period="month", start=DAY, end=DAY)
    report_ms = (time.perf_counter() - began) * 1000
    samples = GpuMetric.objects.count()
    print(f"{HOSTS * GPUS} GPUs, {samples} minute samples, {rows} daily rows")
    print(f"compute_day: median {statistics.median(timings):.2f} s, max {max(timings):.2f} s "
          f"over {RUNS} runs")  # fmt: skip
    print(f"month report per user: {report_ms:.0f} ms for {len(lines)} lines")


if __name__ == "__main__":
    main()
