"""Workers on two machines, as docs/operating.md, "Production", sets them up: each machine has
its own data directory with the service's SSH key copied into it, the same hive.env (one
PostgreSQL, one Redis, one SECRET_KEY) and runs what `deploy/systemd/gpuhive-workers.service`
runs (`manage.py workers`: the schedules, then the cluster under its supervisor), each in a
session of its own. They share the probing loop's lease and Redis's task queue; the machine
whose loop holds the lease then dies (SIGKILL to every process of its session) and the other
machine's loop takes over through the watchdog schedule."""

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.models import Task as QTask
from django_q.tasks import async_task

from core.models import Activity
from monitoring.loop import LOOP_ACTIVITY, SCHEDULES, lease_seconds
from monitoring.models import Host
from tests.faults.supervised import session_members
from tests.monitoring.conftest import make_host
from tests.monitoring.test_ssh_probe import UUID0, gpu_row
from tests.security.conftest import service_env

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "gpuhive-workers.service"
INTERVAL = 0.5  # MONITORING_INTERVAL in the shared hive.env: the loop records every 0.5 s
# django-q2 (cluster.py, Sentinel.guard) looks at the schedules once every 30 s of its guard
# loop; no setting shortens that.
SCHEDULER_CADENCE = 30
WATCHDOG_PERIOD = 60 * SCHEDULES["monitoring: probing loop (watchdog)"][1]
# Startup: each supervisor probes once and queues a loop at once; the bound is still that of
# the watchdog schedule (qcluster boots, its first look at the schedules comes 30 s later).
LOOP_START_BOUND = SCHEDULER_CADENCE + 60


@pytest.fixture
def redis_broker(settings):
    """The production profile's task broker; skips (CI's first pass) without REDIS_URL."""
    if not settings.REDIS_URL:
        pytest.skip("two worker machines share tasks through Redis (CI's second run has it)")
    broker = get_broker()
    broker.purge_queue()  # tasks earlier tests left would otherwise run on these workers
    yield broker
    broker.purge_queue()


def unit_command() -> list[str]:
    """ExecStart of the workers' unit, run by this test's Python."""
    lines = UNIT.read_text().splitlines()
    (line,) = (line for line in lines if line.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart="))
    assert argv[0] == "/opt/gpuhive/.venv/bin/python", argv
    return [sys.executable, *argv[1:]]


class WorkerMachine:
    """One worker machine: its own HIVE_DATA_DIR with the service key copied in (docs/operating.md:
    `scp -rp` of the ssh folder, 0700 and 0600), the shared hive.env, gpuhive-workers."""

    def __init__(self, name: str, root: Path, key_dir: Path, hive_env: dict):
        self.name, self.data_dir = name, root / name
        ssh = self.data_dir / "ssh"
        shutil.copytree(key_dir, ssh)
        ssh.chmod(0o700)
        (ssh / "id_ed25519").chmod(0o600)
        self.env = service_env(self.data_dir, **hive_env)
        self.log = self.data_dir / "qcluster.log"
        self.proc = None

    def start(self) -> None:
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                unit_command(),
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own session: the machine, killed at once
            )

    def owns(self, pid: int | None) -> bool:
        """Whether a process of this machine (its session: supervisor and cluster) has it."""
        if pid is None or self.proc is None:
            return False
        try:
            return os.getsid(pid) == self.proc.pid
        except ProcessLookupError:
            return False

    def kill(self) -> None:
        """The machine dies: SIGKILL to every process of its session, no cleanup run."""
        if self.proc is None:
            return
        for pid in session_members(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return f"--- {self.name} (last lines of qcluster) ---\n" + "\n".join(lines[-25:])


def loop_holder() -> tuple[str, int | None]:
    """The probing loop's lease holder ("hostname:pid:random", see ProbeLoop) and its pid."""
    holder = Activity.objects.filter(name=LOOP_ACTIVITY).values_list("holder", flat=True).first()
    if not holder:
        return "", None
    return holder, int(holder.split(":")[-2])


def last_seen(host: Host):
    return Host.objects.values_list("last_seen", flat=True).get(pk=host.pk)


def until(predicate, seconds: float, what: str, machines, step: float = 0.2):
    """predicate()'s first truthy value within `seconds`, else fail with the machines' logs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        for machine in machines:
            assert machine.alive() or machine.proc.returncode == -signal.SIGKILL, machine.tail()
        time.sleep(step)
    logs = "\n".join(machine.tail() for machine in machines)
    holder = loop_holder()[0]
    raise AssertionError(f"not within {seconds:.0f}s: {what} (lease holder {holder!r})\n{logs}")


def done(task_id: str, seconds: float, machines):
    """The result of a task put on the broker, once a worker of either machine did it."""
    task = until(
        lambda: QTask.objects.filter(id=task_id).first(), seconds, f"task {task_id}", machines
    )
    assert task.success, task.result
    return task.result


def test_two_worker_machines_share_the_work_and_the_survivor_takes_over_the_loop(
    postgresql_only, redis_broker, mortal_sshd, gpus, hive_data_dir, tmp_path, settings
):
    settings.MONITORING_INTERVAL = INTERVAL  # as the machines have it: their lease length
    lease = lease_seconds()
    # Worst case after the kill: a watchdog run just before the dead loop's lease expires is
    # refused; the next comes one period later and a scheduler pass may notice it 30 s late;
    # then a worker starts the loop and its first cycle probes. Slack for the shared cores.
    takeover_bound = lease + WATCHDOG_PERIOD + SCHEDULER_CADENCE + 20

    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    host = make_host(mortal_sshd, "node-2", "127.0.0.2")
    key_dir = hive_data_dir / "ssh"  # the key the sshd trusts, made "on the first machine"
    key = (key_dir / "id_ed25519").read_bytes()
    hive_env = {  # /etc/gpuhive/hive.env, the same on both machines
        # This process plays the web machine: django-q2 signs each task with SECRET_KEY, and
        # a worker with another key drops the tasks the web puts on the queue.
        "SECRET_KEY": django_settings.SECRET_KEY,
        "REDIS_URL": django_settings.REDIS_URL,
        "MONITORING_INTERVAL": str(INTERVAL),
        "Q_WORKERS": "2",  # one may hold the loop, one is free for tasks, on each machine
        "Q_LOG_LEVEL": "INFO",  # django-q2's line per task: who started the survivor's loop
        "SSH_CONNECT_TIMEOUT": "3",
    }
    machines = [WorkerMachine(n, tmp_path, key_dir, hive_env) for n in ("machine-a", "machine-b")]
    try:
        for machine in machines:
            machine.start()

        # (1) The schedule starts one loop; it probes the host and holds the lease alone.
        def probing_holder():
            holder, pid = loop_holder()
            up = Host.objects.filter(pk=host.pk, status=Host.Status.UP).exists()
            owners = [m for m in machines if m.owns(pid)]
            return up and len(owners) == 1 and (holder, owners[0])

        holder, prober = until(probing_holder, LOOP_START_BOUND, "a loop probes", machines)
        seen = last_seen(host)
        until(lambda: last_seen(host) > seen, 10, "last_seen advances", machines)
        assert loop_holder()[0] == holder

        # (2) Work put on Redis is done by the clusters: probes now (the admin's action),
        # and more probing loops, which the lease turns away while the first one runs.
        probes = [async_task("monitoring.tasks.probe_host_now", host.pk) for _ in range(3)]
        loops = [async_task("monitoring.loop.run_probe_loop") for _ in range(2)]
        for task_id in probes:
            assert done(task_id, 60, machines) == "node-2: 1 GPUs"
        for task_id in loops:
            assert done(task_id, 60, machines).startswith(f"another loop ({holder}) holds")
        assert loop_holder()[0] == holder

        # (3) The prober's machine dies; the other machine's loop takes over.
        (survivor,) = (m for m in machines if m is not prober)
        holder, pid = loop_holder()
        assert prober.owns(pid), (holder, "the loop moved before the kill")
        logged = survivor.log.stat().st_size
        killed_at, started = timezone.now(), time.monotonic()
        prober.kill()
        assert loop_holder()[0] == holder  # the dead loop's lease runs out by itself

        def taken_over():
            new, new_pid = loop_holder()
            return survivor.owns(new_pid) and last_seen(host) > killed_at and new

        new_holder = until(taken_over, takeover_bound, "the survivor's loop probes", machines)
        takeover = time.monotonic() - started
        print(
            f"\ntakeover after {takeover:.1f}s (bound {takeover_bound:.0f}s: lease {lease:.0f}s"
            f" + watchdog every {WATCHDOG_PERIOD}s + scheduler every {SCHEDULER_CADENCE}s"
            f" + 20s): {holder} -> {new_holder}"
        )
        seen = last_seen(host)
        until(lambda: last_seen(host) > seen, 10, "last_seen advances again", machines)
        assert Host.objects.get(pk=host.pk).status == Host.Status.UP
        with survivor.log.open(errors="replace") as log:  # started by the watchdog schedule
            log.seek(logged)
            assert "from schedule [monitoring: probing loop (watchdog)]" in log.read()
        assert survivor.alive()
        # Each machine probed with the key copied to it: neither made a key of its own.
        for machine in machines:
            assert (machine.data_dir / "ssh" / "id_ed25519").read_bytes() == key
    finally:
        for machine in machines:
            machine.kill()
