"""The README's "Try it" in both orders: `manage.py demo` then `serve`, and `serve` then
`demo`. Before, the demo's hosts were addresses nobody answered: within a minute of `serve`
they were all down, its running jobs became ghosts, `doctor` exited 1 and the demo could not
be removed. Now its hosts are simulated in the service's processes: they stay up with changing
readings, a job ends, protection finds the intruder, `doctor` passes, and `demo --remove`
leaves no row of it and no process behind."""

import subprocess
import sys
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from board import demolab
from jobs.models import Job, Task
from monitoring.models import Device, Host
from protection.models import Violation
from reservations.models import Reservation
from tests.faults.supervised import ROOT, Service, answers, service, session_members, until
from tests.security.conftest import free_port

pytestmark = pytest.mark.django_db(transaction=True)

DEMO = ["demo", "--hosts", "3", "--gpus", "4", "--history-hours", "0"]


@pytest.fixture
def data_dir(tmp_path, settings):
    settings.HIVE_DATA_DIR = tmp_path / "data"  # where this process and the service look
    settings.HIVE_DATA_DIR.mkdir()
    return settings.HIVE_DATA_DIR


@pytest.fixture
def env(data_dir, tmp_path):
    return service(data_dir, tmp_path / "gpus", MONITORING_INTERVAL="1")


@pytest.fixture
def serve(env, tmp_path):
    servers = []

    def start() -> Service:
        port = free_port()
        server = Service(["serve", "--port", str(port)], env, tmp_path / "serve.log")
        server.url = f"http://127.0.0.1:{port}"
        servers.append(server)
        until(lambda: answers(f"{server.url}/accounts/login/"), 90, "the web app answers", server)
        return server

    yield start
    for server in servers:
        server.kill_all()


def manage(env, *args) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(ROOT / "manage.py"), *args]
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def probed_since(moment) -> bool:
    """Every demo host was probed after ``moment``, and every one but the faulty answers."""
    hosts = list(Host.objects.filter(name__startswith="demo-").order_by("name"))
    fresh = all(h.last_probe_at and h.last_probe_at > moment for h in hosts)
    return fresh and [h.status for h in hosts] == ["up", "up", "error"]


def readings(name: str) -> list:
    return Host.objects.get(name=name).last_snapshot["gpus"]


def test_demo_then_serve_stays_live_and_is_removed_without_a_trace(env, serve):
    done = manage(env, *DEMO)
    assert done.returncode == 0, done.stderr
    seeded = timezone.now()
    # The seeded job on demo-002 ends 20 s from now (it has run all but that of its epochs).
    task = Task.objects.get(host__name="demo-002")
    epochs = int(task.parameters["epochs"])
    began = timezone.now() - timedelta(seconds=epochs * demolab.EPOCH_SECONDS - 20)
    Task.objects.filter(pk=task.pk).update(started_at=began)

    server = serve()
    until(lambda: probed_since(seeded), 60, "every demo host probed by the service", server)
    first = readings("demo-001")
    until(lambda: readings("demo-001") != first, 30, "the readings change", server)
    until(
        lambda: Violation.objects.filter(offender_unix="linus").exists(),
        60,
        "protection finds the intruder on ada's booking",
        server,
    )
    until(
        lambda: Task.objects.get(pk=task.pk).status == Task.Status.EXITED,
        120,
        "the demo job ends and a sync records it",
        server,
    )
    assert Task.objects.get(pk=task.pk).exit_code == 0
    assert probed_since(timezone.now() - timedelta(seconds=10)), "hosts still up"
    doctor = manage(env, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr

    server.kill_all()
    assert session_members(server.proc.pid) == []
    removed = manage(env, "demo", "--remove")
    assert removed.returncode == 0, removed.stderr
    assert_no_demo_left()


def test_serve_then_demo_then_remove_while_serving(env, serve):
    """The commands run in this process here: with the test's DATABASE_URL a subprocess gets
    Django's own SQLite backend, whose deferred transactions fail at once ("database is
    locked") beside the workers' writes, where the embedded profile's backend waits its turn
    (core.sqlite3), as this process's does."""
    server = serve()
    call_command(*DEMO, stdout=StringIO())
    seeded = timezone.now()
    until(lambda: probed_since(seeded), 60, "the running service probes the new demo", server)

    out = StringIO()
    call_command("demo", "--remove", stdout=out)
    assert "Removed the demo lab: 3 hosts" in out.getvalue()
    time.sleep(3)  # a few cycles of the loop, whose sessions of those hosts are now gone
    assert server.proc.poll() is None, server.tail()
    assert_no_demo_left()
    assert answers(f"{server.url}/accounts/login/")


def assert_no_demo_left() -> None:
    assert not Host.objects.exists() and not Device.objects.exists()
    assert not Task.objects.exists() and not Job.objects.exists()
    assert not Reservation.objects.exists() and not Violation.objects.exists()
    users = get_user_model().objects.filter(username__in=demolab.PEOPLE)
    assert not users.exists()
    assert not demolab.lab_file().exists()
