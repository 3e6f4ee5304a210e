"""Benchmark: API reads of reservations, the lean way against the serializer way, in-process.

On a fresh SQLite file database: 8 hosts × 8 GPUs and 5,000 reservations (one every 5 hours
per GPU, 2 to 4 hours long, from 8 days ago), the data of issue 18's comparison with
TensorHive; or RESERVATIONS from HISTORY_DAYS ago, as a lab with months of bookings has them
(50,000 from 150 days ago reach about two weeks ahead). Requests go through Django's test
client (middleware, session, permissions, rendering), one client, signed in:

- week: /api/reservations/?device=<8 GPUs>&start=<Monday>&end=<next Monday> (about 270);
- list: /api/reservations/ (its first page).

Ways, interleaved over ROUNDS rounds: `lean` (the list read with values() and written by
orjson: reservations.api.reservation_rows, hiveproject.renderers) and `serializer` (DRF's
ModelViewSet.list with ReservationSerializer and DRF's JSONRenderer, as before issue 18).
It checks that both ways answer the same JSON, then prints p50 and p95 in ms and the ratio.

Run: .venv/bin/python bench/api_reads.py [RESERVATIONS [HISTORY_DAYS]]
"""

import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["HIVE_DATA_DIR"] = tempfile.mkdtemp(prefix="hive-bench-")
os.environ["ALLOWED_HOSTS"] = "testserver"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402
from rest_framework import viewsets  # noqa: E402
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer  # noqa: E402

from monitoring.models import Device, Host  # noqa: E402
from reservations.api import ReservationViewSet  # noqa: E402
from reservations.models import Reservation, ReservedDevice  # noqa: E402

HOSTS, GPUS, RESERVATIONS, USERS = 8, 8, 5000, 20
ROUNDS = 3
RUNS = {"week": 30, "list": 4}
HOUR = timedelta(hours=1)


def populate(reservations: int = RESERVATIONS, history_days: int = 8) -> tuple[object, list]:
    User = get_user_model()
    User.objects.bulk_create(User(username=f"user{i}") for i in range(USERS))
    users = list(User.objects.order_by("pk"))
    hosts = Host.objects.bulk_create(
        Host(name=f"node-{h}", address=f"10.0.0.{h + 1}") for h in range(HOSTS)
    )
    Device.objects.bulk_create(
        Device(host=host, index=i, uuid=f"GPU-{host.name}-{i}")
        for host in hosts
        for i in range(GPUS)
    )
    devices = list(Device.objects.order_by("host__name", "index"))
    rng = random.Random(18)
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    origin = now - timedelta(days=history_days)
    specs = [
        (device, origin + 5 * HOUR * k, rng.randint(2, 4) * HOUR, rng.choice(users))
        for k in range(reservations // len(devices) + 1)
        for device in devices
    ][:reservations]
    made = Reservation.objects.bulk_create(
        Reservation(owner=u, title=f"run {i}", start=s, end=s + length)
        for i, (_, s, length, u) in enumerate(specs)
    )
    ReservedDevice.objects.bulk_create(
        ReservedDevice(reservation=r, device=d, start=r.start, end=r.end)
        for r, (d, *_rest) in zip(made, specs, strict=True)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return users[0], devices


def serializer_way():
    """The list as before: DRF's ModelViewSet.list, its serializer and JSON renderer."""
    return mock.patch.multiple(
        ReservationViewSet,
        list=viewsets.ModelViewSet.list,
        renderer_classes=[JSONRenderer, BrowsableAPIRenderer],
    )


WAYS = {"lean": contextlib.nullcontext, "serializer": serializer_way}


def percentile(values, share) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def get(client, url) -> bytes:
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"{url}: {response.status_code}")
    return response.content


def main() -> None:
    given = sys.argv[1:]
    reservations = int(given[0]) if given else RESERVATIONS
    history_days = int(given[1]) if len(given) > 1 else 8
    call_command("migrate", verbosity=0)
    user, devices = populate(reservations, history_days)
    client = Client()
    client.force_login(user)
    monday = timezone.localdate() - timedelta(days=timezone.localdate().weekday())
    ids = ",".join(str(d.pk) for d in devices[:8])
    urls = {
        "week": f"/api/reservations/?device={ids}&start={monday}T00:00&end="
        f"{monday + timedelta(days=7)}T00:00",
        "list": "/api/reservations/",
    }
    answers = {}
    for name, patch in WAYS.items():
        with patch():
            answers[name] = {what: get(client, url) for what, url in urls.items()}
    if answers["lean"] != answers["serializer"]:
        raise RuntimeError("the two ways answer differently")
    week_rows = answers["lean"]["week"].count(b'"id"')
    times = {(name, what): [] for name in WAYS for what in urls}
    for _ in range(ROUNDS):
        for name, patch in WAYS.items():
            with patch():
                for what, url in urls.items():
                    for _ in range(RUNS[what]):
                        started = time.perf_counter()
                        get(client, url)
                        times[name, what].append(1000 * (time.perf_counter() - started))
    print(
        f"{reservations} reservations from {history_days} days ago on {HOSTS * GPUS} GPUs; "
        f"the week of 8 GPUs holds "
        f"{week_rows}; {ROUNDS} interleaved rounds; load average {os.getloadavg()[0]:.1f}"
    )
    print("what   way          p50 ms   p95 ms   serializer p50 / lean p50")
    for what in urls:
        for name in WAYS:
            values = times[name, what]
            ratio = statistics.median(times["serializer", what]) / statistics.median(values)
            print(
                f"{what:6s} {name:11s} {statistics.median(values):8.1f} "
                f"{percentile(values, 0.95):8.1f}   {ratio:.1f}"
            )


if __name__ == "__main__":
    main()
