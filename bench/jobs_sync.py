"""Benchmark: the status sync of N running tasks on one host, over one real OpenSSH sshd.

Starts N real tasks (`sleep`) in GNU screen as this UNIX user, then times:

- sync: what the workers do after a monitoring cycle: one SSH command for all N tasks
  (screen -ls + exit files) and the database updates;
- per task: the TensorHive way, one command per task (the same script asked about one
  session at a time), over the same open connection;
- spawn: starting one task (claim, audit, screen -dmS, wait for its pid).

Run: .venv/bin/python bench/jobs_sync.py [N ...]   (default 1 10 50)
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["HIVE_DATA_DIR"] = tempfile.mkdtemp(prefix="hive-bench-")
os.environ["JOBS_LOG_DIR"] = str(Path(os.environ["HIVE_DATA_DIR"]) / "logs")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")

import django  # noqa: E402

django.setup()

from benchlab import user_and_ssh_host  # noqa: E402
from django.core.management import call_command  # noqa: E402

from jobs import remote, services  # noqa: E402
from jobs.models import Task  # noqa: E402
from monitoring.keys import public_key_line  # noqa: E402
from tests.realparts import Sshd  # noqa: E402

REPEATS = 5


def setup(sshd: Sshd):
    return user_and_ssh_host(sshd)


def start_tasks(user, host, n: int) -> tuple[list[Task], float]:
    specs = [services.TaskSpec(host=host, template="sleep 600") for _ in range(n)]
    job = services.create_job(user, name=f"bench {n}", specs=specs)
    times = []
    for task in job.tasks.all():
        started = time.perf_counter()
        services.spawn_task(task, user)
        times.append(time.perf_counter() - started)
    return list(Task.objects.filter(job=job).select_related("host")), statistics.median(times)


def timed(fn) -> float:
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main(sizes: list[int]) -> None:
    call_command("migrate", verbosity=0)
    workdir = Path(tempfile.mkdtemp(prefix="bench-sshd-"))
    sshd = Sshd(workdir, public_key_line(), workdir / "gpus")
    sshd.start()
    try:
        user, host = setup(sshd)
        print("| tasks | sync (1 command) ms | one command per task ms | spawn one ms |")
        print("|---|---|---|---|")
        for n in sizes:
            tasks, spawn = start_tasks(user, host, n)
            sync = timed(lambda tasks=tasks: services.sync_tasks(tasks))
            each = timed(
                lambda tasks=tasks: [
                    remote.session_states(host, t.unix_username, [t.session_name]) for t in tasks
                ]
            )
            print(f"| {n} | {sync * 1000:.0f} | {each * 1000:.0f} | {spawn * 1000:.0f} |")
            for task in tasks:
                services.signal_task(task, None, "kill")
            time.sleep(1.5)
            subprocess.run(["screen", "-wipe"], capture_output=True, check=False)
    finally:
        remote.close_all()
        sshd.stop()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 10, 50])
