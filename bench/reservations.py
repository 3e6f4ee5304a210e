"""Benchmark: reservations with 100 hosts x 8 GPUs and 50,000 reservations in the database.

Prints, on a fresh database (SQLite file in a temporary data dir, or the PostgreSQL database
named by DATABASE_URL, which is emptied first):

- week: the calendar's data for one week and 32 GPUs, the two API requests its script makes
  (/api/access/ for the shading, /api/reservations/ for the bookings), one after the other,
  whole through Django's test client;
- overview: the overview computation for 7 days and all 800 GPUs (134,400 hour cells), and
  the whole overview page including its HTML;
- booking: create_reservation from 8 concurrent threads (8 clients, own DB connections),
  each booking free slots on its own GPUs; bookings per second.

Run: .venv/bin/python bench/reservations.py
     DATABASE_URL=postgres://root@127.0.0.1:5432/bench_res .venv/bin/python bench/reservations.py
"""

import os
import random
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from datetime import time as dtime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["HIVE_DATA_DIR"] = tempfile.mkdtemp(prefix="hive-bench-")
os.environ["ALLOWED_HOSTS"] = "testserver"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from accesscontrol.services import ensure_default_group  # noqa: E402
from monitoring.models import Device, Host  # noqa: E402
from reservations.models import Reservation, ReservedDevice  # noqa: E402
from reservations.overview import overview_rows  # noqa: E402
from reservations.services import create_reservation  # noqa: E402

HOSTS, GPUS, RESERVATIONS, USERS = 100, 8, 50_000, 50
WEEK_RUNS, OVERVIEW_RUNS, CLIENTS, BOOKINGS_PER_CLIENT = 50, 10, 8, 25
HOUR = timedelta(hours=1)


def fresh_database() -> None:
    if connection.vendor == "postgresql":
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)


def populate() -> tuple[list, list[Device]]:
    User = get_user_model()
    users = User.objects.bulk_create(User(username=f"user{i}") for i in range(USERS))
    users = list(User.objects.filter(username__startswith="user").order_by("pk"))
    ensure_default_group()
    hosts = Host.objects.bulk_create(
        Host(name=f"node-{h:03d}", address=f"10.0.{h // 250}.{h % 250}") for h in range(HOSTS)
    )
    Device.objects.bulk_create(
        Device(host=host, index=i, uuid=f"GPU-{host.name}-{i}")
        for host in hosts
        for i in range(GPUS)
    )
    devices = list(Device.objects.select_related("host").order_by("host__name", "index"))
    book_history(users, devices)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh statistics, as autovacuum would have after a load
    return users, devices


def book_history(users, devices) -> None:
    """62-63 bookings per GPU, one every 12 hours from 15 days ago, 2 to 10 hours long."""
    rng = random.Random(5)
    origin = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(days=15)
    per_device = RESERVATIONS // len(devices) + 1
    specs = [
        (device, origin + 12 * HOUR * k, rng.randint(2, 10) * HOUR, rng.choice(users))
        for k in range(per_device)
        for device in devices
    ][:RESERVATIONS]
    for chunk in range(0, len(specs), 5000):
        part = specs[chunk : chunk + 5000]
        made = Reservation.objects.bulk_create(
            Reservation(owner=u, title="history", start=s, end=s + length)
            for _, s, length, u in part
        )
        ReservedDevice.objects.bulk_create(
            ReservedDevice(reservation=r, device=d, start=r.start, end=r.end)
            for r, (d, *_rest) in zip(made, part, strict=True)
        )


def percentile(values, share) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def timed(fn, runs) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return times


def bench_week(user, devices) -> None:
    client = Client()
    client.force_login(user)
    today = timezone.localdate()
    monday = timezone.make_aware(datetime.combine(today - timedelta(days=today.weekday()), dtime()))
    query = {
        "start": monday.isoformat(),
        "end": (monday + timedelta(days=7)).isoformat(),
        "device": ",".join(str(d.pk) for d in devices[:32]),
    }

    def get(url, **extra):
        response = client.get(url, {**query, **extra})
        assert response.status_code == 200, response.content[:200]
        return response.json()

    def week():
        get("/api/access/")
        return get("/api/reservations/", page_size=1000)

    bookings = week()
    times = timed(week, WEEK_RUNS)
    print(
        f"week, 32 GPUs ({len(bookings)} bookings): p50 {statistics.median(times):.1f} ms, "
        f"p95 {percentile(times, 0.95):.1f} ms over {WEEK_RUNS} pairs of requests"
    )


def bench_overview(user) -> None:
    start = timezone.now().replace(minute=0, second=0, microsecond=0)
    compute = timed(lambda: overview_rows(user, start, 7), OVERVIEW_RUNS)
    client = Client()
    client.force_login(user)
    page = timed(lambda: client.get("/reservations/overview/"), OVERVIEW_RUNS)
    print(
        f"overview, 7 days x {HOSTS * GPUS} GPUs: computation median "
        f"{statistics.median(compute):.0f} ms (p95 {percentile(compute, 0.95):.0f}), "
        f"whole page median {statistics.median(page):.0f} ms"
    )


def bench_booking(users, devices) -> None:
    """Each client books its own GPUs one after another, far past the history."""
    base = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(days=30)
    errors, barrier = [], threading.Barrier(CLIENTS)

    def client(n):
        try:
            mine, user = devices[n * 4 : n * 4 + 4], users[n]
            barrier.wait()
            for k in range(BOOKINGS_PER_CLIENT):
                start = base + 2 * HOUR * k
                create_reservation(user, title="bench", devices=mine, start=start, end=start + HOUR)
        except Exception as exc:  # reported below: a benchmark must not hide failures
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    total = CLIENTS * BOOKINGS_PER_CLIENT
    print(
        f"booking, {CLIENTS} concurrent clients, 4 GPUs each: {total} bookings in {seconds:.2f} s"
        f" = {total / seconds:.0f} bookings/s; errors: {len(errors)} {errors[:1]}"
    )


def main() -> None:
    fresh_database()
    started = time.perf_counter()
    users, devices = populate()
    count, took = Reservation.objects.count(), time.perf_counter() - started
    print(f"{connection.vendor}: {HOSTS} hosts x {GPUS} GPUs, {count} reservations ({took:.0f} s)")
    bench_week(users[0], devices)
    bench_overview(users[0])
    bench_booking(users, devices)


if __name__ == "__main__":
    main()
