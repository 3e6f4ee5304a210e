"""Benchmark: how long a "start" keeps a web request, before and after actions moved to
the workers, against a real OpenSSH sshd and a real django-q2 cluster (SQLite, ORM broker).

For each of N tasks, times:

- in the request (before): the start done where the request ran (``services.spawn_task``:
  claim, audit, SSH, screen, wait for the pid);
- answer (now): ``POST /api/tasks/<id>/act/`` through Django's test client, answered 202
  with the task "starting";
- settled (now): from that POST until the workers have the task "running" (or, for a host
  that cannot be reached, "failed" with why);

and the same for a host whose port accepts TCP but never answers (a hung sshd): there the
request used to wait for the SSH timeout.

Run: .venv/bin/python bench/actions_latency.py [N]   (default 10)
"""

import getpass
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
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
from django.core.exceptions import ValidationError  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from jobs import remote, services  # noqa: E402
from jobs.models import Task  # noqa: E402
from monitoring.keys import public_key_line  # noqa: E402
from monitoring.models import Host  # noqa: E402
from tests.realparts import Sshd  # noqa: E402


def setup(sshd: Sshd):
    return user_and_ssh_host(sshd)


def silent_port() -> int:
    """A port that accepts connections and never says anything (a hung sshd)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held = []
    threading.Thread(target=lambda: [held.append(listener.accept()) for _ in iter(int, 1)],
                     daemon=True).start()  # fmt: skip
    return listener.getsockname()[1]


def pending_tasks(user, host, n: int) -> list[Task]:
    specs = [services.TaskSpec(host=host, template="sleep 600") for _ in range(n)]
    return list(services.create_job(user, name="bench", specs=specs).tasks.all())


def in_request(user, tasks) -> list[float]:
    times = []
    for task in tasks:
        started = time.perf_counter()
        try:
            services.spawn_task(task, user)
        except ValidationError as exc:  # a hung host fails: its time is what counts
            assert task.host.name == "hung", exc
        times.append(time.perf_counter() - started)
    return times


def through_workers(client, tasks) -> tuple[list[float], list[float]]:
    answers, running = [], []
    for task in tasks:
        started = time.perf_counter()
        response = client.post(
            f"/api/tasks/{task.pk}/act/", {"action": "spawn"}, content_type="application/json"
        )
        answers.append(time.perf_counter() - started)
        assert response.status_code == 202, response.content
        while Task.objects.get(pk=task.pk).status == Task.Status.STARTING:
            time.sleep(0.005)
        running.append(time.perf_counter() - started)
    return answers, running


def ms(samples) -> str:
    return f"{statistics.median(samples) * 1000:.0f} / {max(samples) * 1000:.0f}"


def main(n: int) -> None:
    call_command("migrate", verbosity=0)
    workdir = Path(tempfile.mkdtemp(prefix="bench-sshd-"))
    sshd = Sshd(workdir, public_key_line(), workdir / "gpus").start()
    env = {**os.environ, "Q_WORKERS": "2"}
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        user, host = setup(sshd)
        hung = Host.objects.create(name="hung", address="127.0.0.1", port=silent_port(),
                                   username=getpass.getuser())  # fmt: skip
        client = Client(SERVER_NAME="localhost")
        client.force_login(user)
        time.sleep(3)  # the cluster's start
        print("| host | start in the request (before) ms | answer (now) ms | settled (now) ms |")
        print("|---|---|---|---|")
        for target, count in ((host, n), (hung, min(n, 3))):
            before = in_request(user, pending_tasks(user, target, count))
            answers, running = through_workers(client, pending_tasks(user, target, count))
            print(f"| {target.name} | {ms(before)} | {ms(answers)} | {ms(running)} |")
        print(f"(median / max over {n} starts on bench, {min(n, 3)} on hung)")
        for task in Task.objects.filter(status=Task.Status.RUNNING).select_related("host"):
            services.signal_task(task, None, "kill")
    finally:
        os.killpg(cluster.pid, signal.SIGINT)
        cluster.wait(timeout=60)
        remote.close_all()
        sshd.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
