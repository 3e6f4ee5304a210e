"""A lab for the queue: hosts with GPUs as their latest probes show them.

Planning tests describe hosts by their stored probe (what the scheduler reads; it never
calls SSH to plan). Tests that start jobs use the real sshd and GNU screen from the jobs
tests, with hosts probed for real through the fake nvidia-smi.
"""

import contextlib
import getpass
import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from accesscontrol.services import ensure_default_group, profile_for
from jobs import remote
from monitoring.inventory import probe_and_record
from monitoring.models import Device, Host
from queueing import services
from reservations.models import Reservation, ReservedDevice
from tests.jobs.conftest import log_dir, wait_for  # noqa: F401  (fixtures)
from tests.monitoring.conftest import (  # noqa: F401  (fixtures)
    fake_gpu_root,
    gpus,
    make_host,
    real_processes,
    sshd,
)


def snapshot(host: Host, processes=()) -> dict:
    return {
        "host": host.name,
        "reachable": True,
        "error": None,
        "gpus": [{"index": d.index, "uuid": d.uuid, "name": d.name} for d in host.devices.all()],
        "processes": [
            {
                "gpu_uuid": uuid,
                "pid": pid,
                "user": user,
                "command": "python x.py",
                "memory_mib": 100,
            }
            for uuid, pid, user in processes
        ],
        "cpu": {},
    }


class Lab:
    """Hosts with GPUs, as their latest probes described them."""

    def host(
        self,
        name,
        gpus=4,  # noqa: F811
        model="NVIDIA A100-SXM4-40GB",
        memory=40960,
    ) -> Host:
        host = Host.objects.create(
            name=name,
            address=f"10.0.0.{Host.objects.count() + 1}",
            status=Host.Status.UP,
            last_probe_at=timezone.now(),
        )
        for i in range(gpus):
            Device.objects.create(
                host=host, index=i, uuid=f"{name}-GPU-{i}", name=model, memory_total_mib=memory
            )
        host.last_snapshot = snapshot(host)
        host.save()
        return host

    def busy(self, host: Host, index: int, pid=4242, user="carol") -> None:
        """A process of someone else on one GPU, as the latest probe saw it."""
        host.refresh_from_db()
        processes = [(p["gpu_uuid"], p["pid"], p["user"]) for p in host.last_snapshot["processes"]]
        processes.append((f"{host.name}-GPU-{index}", pid, user))
        host.last_snapshot = snapshot(host, processes)
        host.last_probe_at = timezone.now()
        host.save()

    def idle(self, host: Host) -> None:
        """A new probe that shows no process on the host's GPUs."""
        host.last_snapshot = snapshot(host)
        host.last_probe_at = timezone.now()
        host.save()

    def gpu(self, host: Host, index: int) -> Device:
        return host.devices.get(index=index)


def map_to_own_name(*users) -> None:
    """Give each user the UNIX account of the same name (mappings are explicit now)."""
    for user in users:
        profile = profile_for(user)
        profile.unix_username = user.get_username()
        profile.save()


@pytest.fixture
def lab(db, owner, other_user):
    ensure_default_group()
    map_to_own_name(owner, other_user)
    return Lab()


@pytest.fixture
def third_user(db):
    user = get_user_model().objects.create_user("third", "third@example.org", "pw-third-1")
    ensure_default_group()
    map_to_own_name(user)
    return user


def reserve(user, devices, start, end, status=Reservation.Status.CONFIRMED) -> Reservation:
    """A reservation written directly: the booking rules (minimum length, start in the
    future) are the reservations app's; here only what the scheduler reads matters."""
    reservation = Reservation.objects.create(
        owner=user, title="booked", start=start, end=end, status=status
    )
    for device in devices:
        ReservedDevice.objects.create(reservation=reservation, device=device, start=start, end=end)
    return reservation


def soon(minutes: float):
    return timezone.now() + timedelta(minutes=minutes)


def queue(owner, name="job", *tasks, **options):
    """Enqueue a job; each task a dict of TaskRequest fields (default: 1 GPU, `true`)."""
    requests = [services.TaskRequest(**{"template": "true", **t}) for t in tasks or [{}]]
    return services.enqueue(owner, name=name, tasks=requests, **options)


# --- real runs -------------------------------------------------------------------------------


@pytest.fixture
def runner(owner):
    """The owner, mapped to the UNIX account the test sshd lets in (the current user)."""
    profile = profile_for(owner)
    profile.unix_username = getpass.getuser()
    profile.save()
    ensure_default_group()
    return owner


@pytest.fixture
def other_runner(other_user):
    """The other user, also mapped to the account the test sshd lets in."""
    profile = profile_for(other_user)
    profile.unix_username = getpass.getuser()
    profile.save()
    return other_user


@pytest.fixture
def real_nodes(db, sshd, gpus, settings, log_dir):  # noqa: F811
    """node-2 (127.0.0.2) and node-3 (127.0.0.3), 2 T4s each, probed through the sshd."""
    import shutil

    from tests.realparts import require

    require(shutil.which("screen") is not None, "GNU screen is not installed")
    settings.SSH_CONNECT_TIMEOUT = 3
    remote.close_all()
    task_ids_from(10_000 + os.getpid() % 100_000 * 100)
    hosts = []
    for name, address in (("node-2", "127.0.0.2"), ("node-3", "127.0.0.3")):
        gpus(address).set_gpus(
            [f"{i}, GPU-{name}-{i}, 15360, 0, 0, 0, 30, 20.0, Tesla T4" for i in range(2)]
        )
        gpus(address).set_processes([])
        host = make_host(sshd, name, address)
        probe_and_record(host)
        host.refresh_from_db()
        assert host.status == Host.Status.UP, host.last_error
        hosts.append(host)
    yield hosts
    end_sessions_of(log_dir)
    remote.close_all()


def task_ids_from(start: int) -> None:
    """Number this test's tasks from ``start``. Screen session names are per task id and
    per UNIX account, so tasks of a test process never meet sessions of another (nor
    ones an earlier, interrupted run left)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("DELETE FROM sqlite_sequence WHERE name = 'jobs_task'")
            cursor.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs_task', %s)", [start]
            )
        else:
            cursor.execute("SELECT setval(pg_get_serial_sequence('jobs_task', 'id'), %s)", [start])


def end_sessions_of(logs: Path) -> None:
    """Kill the task process groups this test started (their windows' pid files say which),
    and only those: other test processes may be running tasks of their own."""
    for pid_file in logs.glob("*.pid"):
        text = pid_file.read_text().strip()
        if text.isdigit():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(text), signal.SIGKILL)


def probe_again(*hosts) -> None:
    for host in hosts:
        probe_and_record(host)


__all__ = ["wait_for", "reserve", "soon", "queue", "probe_again"]
