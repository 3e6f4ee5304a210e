"""The demo lab's simulated hosts answer the service's own commands through the real paths
(probes and their parsers, probe sessions, task starts, syncs and logs, protection, doctor),
and `manage.py demo --remove` takes the lab away and leaves everything else alone."""

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from board import demolab
from board.demo import remove, seed
from core.hostcalls import HostCallInRequest, serving_request
from jobs import remote, services
from jobs.models import Job, Task
from monitoring.connections import pool
from monitoring.inventory import record_probe
from monitoring.loop import ProbeLoop
from monitoring.models import Device, GpuMetric, Host
from monitoring.probes import probe_host
from protection.detection import check_hosts
from protection.models import Violation
from reservations.models import Reservation
from reservations.services import create_reservation

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(settings, tmp_path):
    settings.HIVE_DATA_DIR = tmp_path  # the lab's file, this test's own
    pool.close()
    seed(hosts=4, gpus=4, history_hours=1, down=1)
    yield
    pool.close()


def test_it_probes_through_the_real_parsers_and_the_load_changes(lab):
    host = Host.objects.get(name="demo-001")
    first = probe_host(host)
    assert first.status == Host.Status.UP and len(first.gpus) == 4
    assert first.driver_version == "550.54.15" and first.cpu["cores"] == 128
    # ada booked GPUs 0 and 1 of demo-001: only she and the intruder are on them.
    booked = {g.uuid for g in first.gpus[:2]}
    users = {p.user for p in first.processes if p.gpu_uuid in booked}
    assert users <= {"ada", "linus"} and "linus" in users
    time.sleep(1.1)  # readings change every second
    second = probe_host(host)
    assert [g.as_dict() for g in first.gpus] != [g.as_dict() for g in second.gpus]


def test_the_faulty_host_answers_but_its_gpus_do_not(lab):
    result = probe_host(Host.objects.get(name="demo-004"))
    assert result.status == Host.Status.ERROR and "nvidia-smi failed (exit 9)" in result.error
    assert Host.objects.get(name="demo-004").status == Host.Status.ERROR


def test_the_probing_loop_records_every_host_over_sessions(lab, settings):
    settings.MONITORING_PROBE_SESSIONS = True
    loop = ProbeLoop(holder="demo-test")
    try:
        for _ in range(3):  # a session's start, then two answers over it
            loop.cycle()
        assert len(loop.sessions.by_host) == 4
    finally:
        loop.close()
    states = dict(Host.objects.values_list("name", "status"))
    assert states == {
        "demo-001": "up",
        "demo-002": "up",
        "demo-003": "up",
        "demo-004": "error",
    }


def test_protection_finds_the_intruder_on_adas_booking(lab):
    demo = Host.objects.filter(name__startswith="demo-")
    for _ in range(3):  # past the grace of a process there at the booking's start
        for host in demo:
            record_probe(host, probe_host(host))
        check_hosts(list(demo.values_list("pk", flat=True)))
    violation = Violation.objects.get()
    assert violation.offender_unix == "linus"
    assert (
        violation.device.host.name == "demo-001" and violation.reservation.owner.username == "ada"
    )


def test_a_task_runs_logs_and_ends(lab):
    ada = get_user_model().objects.get(username="ada")
    host = Host.objects.get(name="demo-003")  # no booking, no job: its last GPU is free
    device = host.devices.get(index=3)
    job = Job.objects.create(owner=ada, name="quick", template="python t.py --epochs {n}")
    task = Task.objects.create(
        job=job,
        host=host,
        template=job.template,
        parameters={"n": "1"},
        command="python t.py --epochs 1",
    )
    task.devices.set([device])
    task = services.spawn_task(task, ada)
    assert task.status == Task.Status.RUNNING and task.pid == demolab.task_pid(task)
    assert services.sync_tasks([task]) == 0  # still running: its process is on the GPU
    assert any(p.user == "ada" and p.pid > task.pid for p in probe_host(host).processes)
    Task.objects.filter(pk=task.pk).update(started_at=timezone.now() - timedelta(minutes=1))
    task.refresh_from_db()
    assert services.sync_tasks([task]) == 1
    task.refresh_from_db()
    assert (task.status, task.exit_code) == (Task.Status.EXITED, 0)
    (piece,) = remote.read_logs(host, "ada", [(task.log_path, 0)], keep=10_000, limit=10_000)
    assert b"epoch 1/1" in piece.data and piece.data.endswith(b"done\n")


def test_a_stopped_task_ends_killed(lab):
    task = Task.objects.filter(status=Task.Status.RUNNING).first()
    services.stop_task(task, task.job.owner)
    time.sleep(1.1)
    assert services.sync_tasks([task]) == 1
    task.refresh_from_db()
    assert (task.status, task.exit_code) == (Task.Status.KILLED, demolab.TERMINATED)


def test_the_seeded_jobs_are_running_not_ghosts(lab):
    tasks = list(Task.objects.filter(status=Task.Status.RUNNING))
    assert tasks and services.sync_tasks(tasks) == 0


def test_doctor_passes_on_the_demo_hosts(lab, capsys):
    call_command("doctor")
    out = capsys.readouterr().out
    assert "demo-001 (gpuhive-demo@demo-001.demo.invalid:22)" in out
    assert "FAIL" not in out and "all checks passed" in out
    assert Host.objects.get(name="demo-001").host_key_fingerprint.startswith("SHA256:")


def test_other_commands_are_refused_with_a_clear_error(lab):
    with pytest.raises(remote.RemoteError, match="simulated demo host: it runs only"):
        remote.run_as(Host.objects.get(name="demo-001"), "ada", ["rm", "-rf", "/"])


def test_remove_takes_the_lab_away_and_leaves_the_rest(settings, tmp_path):
    settings.HIVE_DATA_DIR = tmp_path
    people = get_user_model().objects
    ada = people.create_user("ada", "ada@real.example.org", "pw-ada-real-1")  # a real ada
    ensure_default_group()  # as `init` makes it: everyone may book
    real = Host.objects.create(name="gpu-1", address="10.0.0.7")
    gpu = Device.objects.create(host=real, index=0, uuid="GPU-real")
    start = timezone.now() + timedelta(hours=1)
    create_reservation(
        ada, title="real work", devices=[gpu], start=start, end=start + timedelta(hours=1)
    )
    before = set(people.values_list("username", flat=True))
    seed(hosts=3, gpus=2, history_hours=1)
    assert demolab.lab_file().exists() and GpuMetric.objects.exists()

    call_command("demo", "--remove", stdout=None)

    assert list(Host.objects.all()) == [real] and list(Device.objects.all()) == [gpu]
    assert set(people.values_list("username", flat=True)) == before
    assert list(Reservation.objects.values_list("title", flat=True)) == ["real work"]
    assert not Task.objects.exists() and not Job.objects.exists()
    assert not Violation.objects.exists() and not GpuMetric.objects.exists()
    assert not demolab.lab_file().exists()
    seed(hosts=1, gpus=1, history_hours=0)  # and it can be made again


def test_it_refuses_twice_and_removing_nothing_says_so(lab, capsys):
    with pytest.raises(CommandError, match="exists already.*--remove"):
        call_command("demo")
    remove()
    call_command("demo", "--remove")
    assert "nothing removed" in capsys.readouterr().out


def test_a_web_request_cannot_call_a_demo_host_either(lab):
    token = serving_request.set("/")
    try:
        with pytest.raises(HostCallInRequest):
            pool.run(Host.objects.get(name="demo-001"), ["id", "-un"])
    finally:
        serving_request.reset(token)
