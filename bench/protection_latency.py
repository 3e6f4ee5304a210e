"""Benchmark: how fast an intruder on a reserved GPU is recorded and first handled.

The real pieces run as in production: a django-q2 cluster (``manage.py qcluster``, ORM
broker, SQLite in WAL mode) runs the leased probing loop at MONITORING_INTERVAL (default
2 s) against a real OpenSSH sshd on loopback; the fake nvidia-smi reports a real `sleep`
process on a GPU that is reserved for someone else. Each cycle's ``cycle_finished`` signal
queues detection, which queues the handlers (the defaults: terminal message, e-mail to the
locmem backend), each a task of their own.

For each trial the intruder "appears" (its PID is written where the fake nvidia-smi reads
it) at a random phase of the loop, and the script polls the database (every 10 ms) for:

- first seen: the probe time of the first cycle that saw it (``Violation.first_seen``);
- recorded: the Violation row exists;
- handled: the first HandlerRun has finished.

The reservation has been running (and probed) before the intruder appears, so detection
flags it at first sight; the grace period only applies to a process already there when a
reservation begins. It runs once with the default grace period (one cycle) and once
without one, to show that.
Run: .venv/bin/python bench/protection_latency.py [trials]   (default 10)
"""

import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA_DIR = tempfile.mkdtemp(prefix="hive-bench-protection-")
os.environ["HIVE_DATA_DIR"] = DATA_DIR
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_q.tasks import async_task  # noqa: E402

from accesscontrol.services import ensure_default_group, profile_for  # noqa: E402
from core.models import Activity  # noqa: E402
from monitoring.keys import public_key_line  # noqa: E402
from monitoring.models import Device, Host  # noqa: E402
from protection.models import CheckedProbe, HandlerRun, Violation  # noqa: E402
from reservations.models import ReservedDevice  # noqa: E402
from reservations.services import create_reservation  # noqa: E402
from tests.realparts import FakeGpus, Sshd  # noqa: E402

UUID = "GPU-10fb0fbd-2696-43f3-467f-d280d906a107"
GPU_ROW = f"0, {UUID}, 40960, 1000, 37, 5, 41, 61.52, NVIDIA A100-SXM4-40GB"


def start_lab(workdir: Path) -> tuple[Sshd, FakeGpus]:
    call_command("migrate", verbosity=0)
    sshd = Sshd(workdir / "sshd", public_key_line(), workdir / "gpus").start()
    fake = FakeGpus(workdir / "gpus", "127.0.0.2")
    fake.set_gpus([GPU_ROW])
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout
    Host.objects.create(name="node-2", address="127.0.0.2", port=sshd.port, username=user.strip())
    return sshd, fake


def book_the_gpu() -> None:
    """Someone whose UNIX account is not ours reserves the GPU: our processes intrude."""
    owner = get_user_model().objects.create_user("owner", "owner@example.org", "x")
    profile = profile_for(owner)
    profile.unix_username = "someone-else"
    profile.save()
    ensure_default_group()
    start = timezone.now() - timedelta(seconds=30)
    device = Device.objects.get(uuid=UUID)
    create_reservation(
        owner, title="bench", devices=[device], start=start, end=start + timedelta(hours=2)
    )


def checked_during_the_reservation() -> bool:
    """Detection has checked a probe taken during the reservation (one without the intruder),
    so the intruder's first probe is measured, not a reservation's start."""
    start = ReservedDevice.objects.get(device__uuid=UUID).start
    return CheckedProbe.objects.filter(probe_at__gte=start).exists()


def start_cluster(grace: int) -> subprocess.Popen:
    env = dict(
        os.environ,
        PROTECTION_GRACE_CYCLES=str(grace),
        EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
        LOG_LEVEL="WARNING",
    )
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group, so it is stopped with its workers
        stdout=subprocess.DEVNULL,
        stderr=open(Path(DATA_DIR) / f"qcluster-{grace}.log", "w"),  # noqa: SIM115
    )
    async_task("monitoring.loop.run_probe_loop")
    return cluster


def stop_cluster(cluster: subprocess.Popen) -> None:
    os.killpg(cluster.pid, signal.SIGKILL)
    cluster.wait()
    Host.objects.update(status=Host.Status.UNKNOWN)
    # The killed loop's lease would keep the next cluster's loop waiting until it expires.
    Activity.objects.filter(name="probe-loop").update(holder="", lease_expires=None)


def wait_for(condition, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.01)
    raise RuntimeError("timed out waiting")


def trial(fake: FakeGpus) -> dict:
    intruder = subprocess.Popen(["sleep", "600"])
    time.sleep(random.uniform(0, settings.MONITORING_INTERVAL))  # a random phase of the loop
    appeared = time.time()
    fake.set_processes([f"{UUID}, {intruder.pid}, 100, sleep"])
    violation = wait_for(lambda: Violation.objects.filter(pid=intruder.pid).first())
    recorded = time.time()
    run = wait_for(
        lambda: (
            HandlerRun.objects.filter(violation=violation, finished_at__isnull=False)
            .order_by("finished_at")
            .first()
        )
    )
    intruder.kill()
    intruder.wait()
    fake.set_processes([])
    wait_for(lambda: Violation.objects.filter(pk=violation.pk, ended_at__isnull=False).exists())
    return {
        "first seen": violation.first_seen.timestamp() - appeared,
        "recorded": recorded - appeared,
        "handled": run.finished_at.timestamp() - appeared,
        "seen→handled": run.finished_at.timestamp() - violation.first_seen.timestamp(),
    }


def report(grace: int, results: list[dict]) -> None:
    print(
        f"\ngrace period {grace} cycle(s), interval {settings.MONITORING_INTERVAL:g} s, "
        f"{len(results)} trials (seconds after the process appeared):"
    )
    print(f"{'':14}{'median':>8}{'max':>8}")
    for key in results[0]:
        values = [r[key] for r in results]
        print(f"{key:14}{statistics.median(values):8.2f}{max(values):8.2f}")


def main(trials: int) -> None:
    workdir = Path(DATA_DIR)
    sshd, fake = start_lab(workdir)
    try:
        cluster = start_cluster(0)
        wait_for(lambda: Device.objects.filter(uuid=UUID).exists())
        book_the_gpu()
        stop_cluster(cluster)
        for grace in (1, 0):
            cluster = start_cluster(grace)
            try:
                wait_for(lambda: Host.objects.filter(status=Host.Status.UP).exists())
                wait_for(checked_during_the_reservation)
                report(grace, [trial(fake) for _ in range(trials)])
            finally:
                stop_cluster(cluster)
    finally:
        sshd.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
