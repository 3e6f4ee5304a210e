"""The probing loop at 100 hosts, in a process of its own, beside 50 people booking at once:
no cycle fails and no booking gets a 5xx. On the embedded profile both write to one SQLite
file: before, the loop's writes outside a transaction met the bookers' writers with nothing
but SQLite's busy_timeout ("probing loop: cycle failed: OperationalError: database is
locked" in CI); now every writing path waits its turn in one mechanism."""

import json
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import Client

from accesscontrol.services import ensure_default_group
from monitoring.models import Device, Host
from tests.api.conftest import tomorrow
from tests.faults.supervised import ROOT
from tests.security.conftest import service_env

pytestmark = pytest.mark.django_db(transaction=True)

HOSTS, BOOKERS, BOOKINGS_EACH = 100, 50, 2
LOOP_SECONDS = 25  # the loop's run, long enough for the bookers to finish inside it


def start_loop(tmp_path) -> subprocess.Popen:
    """The loop's process, on the test's database (SQLite: the embedded profile's backend)."""
    argv = [sys.executable, "-m", "tests.faults.simulated_loop", str(LOOP_SECONDS)]
    env = service_env(tmp_path / "data", MONITORING_INTERVAL="0.5")
    if connection.vendor == "sqlite":
        argv.append(connection.settings_dict["NAME"])
        del env["DATABASE_URL"]
    out = (tmp_path / "loop.out").open("w")
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_for_gpus(loop: subprocess.Popen, seconds: float = 60) -> list[list[int]]:
    """Each host's GPUs, once the loop's first cycles have found them."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and loop.poll() is None:
        gpus = {}
        for host_id, pk in Device.objects.values_list("host_id", "pk"):
            gpus.setdefault(host_id, []).append(pk)
        if len(gpus) == HOSTS:
            return list(gpus.values())
        time.sleep(0.2)
    raise AssertionError("the loop did not find the hosts' GPUs")


def book(user, gpus: list[int], answers: list) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    for hour in range(BOOKINGS_EACH):
        start = tomorrow(0) + timedelta(hours=2 * hour)
        body = {
            "title": f"{user.username} {hour}",
            "devices": gpus,
            "start": start.isoformat(),
            "end": (start + timedelta(hours=1)).isoformat(),
        }
        response = client.post("/api/reservations/", body, content_type="application/json")
        answers.append(response.status_code)
    connections.close_all()


@pytest.fixture
def pool_left_small():
    """50 bookers grow this process's PostgreSQL pool to its maximum: closed afterwards, so
    the idle connections do not wait for later tests (which may cut every other session on
    the database, and would leave the pool full of dead ones)."""
    yield
    if hasattr(connection, "close_pool"):  # PostgreSQL's pooled backend
        connection.close()
        connection.close_pool()


def test_the_loop_at_100_hosts_beside_50_bookers_fails_nothing(tmp_path, pool_left_small):
    Host.objects.bulk_create(Host(name=f"sim-{i}", address=f"10.9.0.{i + 1}") for i in range(HOSTS))
    ensure_default_group()
    users = [get_user_model().objects.create_user(f"booker{i}") for i in range(BOOKERS)]
    loop = start_loop(tmp_path)
    try:
        gpus = wait_for_gpus(loop)
        answers = []
        bookers = [
            threading.Thread(target=book, args=(user, gpus[i], answers))
            for i, user in enumerate(users)
        ]
        for booker in bookers:
            booker.start()
        for booker in bookers:
            booker.join()
        loop.wait(timeout=LOOP_SECONDS + 60)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait()
    output = (tmp_path / "loop.out").read_text()
    assert loop.returncode == 0, output
    report = json.loads(output.splitlines()[-1])
    assert report["failures"] == [] and report["cycles"] > 1, output
    assert sorted(answers) == [201] * BOOKERS * BOOKINGS_EACH, sorted(set(answers))
