"""Benchmark: `serve` from start to first probe and to a page, stopped with SIGINT, and the
supervised workers' recovery after all of them are killed.

Each run starts `manage.py serve` on a fresh SQLite data dir (migrated once), host
`localhost` with the fake nvidia-smi, the default MONITORING_INTERVAL (2 s), and measures:
seconds from the start to the first probe stored, to the first page answered (the sign-in
page), then SIGINT: seconds until `serve` returned and the processes of its session still
alive then (must be 0). Then `manage.py workers` with WORKERS_STALL_SECONDS=10: all workers
are killed (SIGKILL) and the seconds until a task queued after the kill has run and a probe
is stored again.

Run: .venv/bin/python bench/serve_start_stop.py [runs]   (default 3)
"""

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA_DIR = Path(tempfile.mkdtemp(prefix="hive-bench-serve-"))
FAKE_BIN = ROOT / "tests" / "fake_bin"
os.environ.update(
    HIVE_DATA_DIR=str(DATA_DIR),
    FAKE_GPU_DIR=str(DATA_DIR / "gpus"),
    PATH=f"{FAKE_BIN}:{os.environ['PATH']}",
    DJANGO_SETTINGS_MODULE="hiveproject.settings",
    LOG_LEVEL="WARNING",
)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django_q.tasks import async_task  # noqa: E402

from monitoring.models import Host  # noqa: E402
from tests.faults.supervised import cluster_workers, session_members  # noqa: E402
from tests.realparts import FakeGpus, free_port  # noqa: E402

MANAGE = [sys.executable, str(ROOT / "manage.py")]


def until(predicate, seconds=120, step=0.05):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise SystemExit("timed out")


def answers(url):
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200  # noqa: S310 (our http URL)
    except OSError:
        return False


def start(args, **env):
    out = open(DATA_DIR / f"{args[0]}.log", "a")  # noqa: SIM115
    return subprocess.Popen(
        [*MANAGE, *args],
        env={**os.environ, **env},
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def first_probe_seen():
    return Host.objects.filter(name="localhost", last_seen__isnull=False).exists()


def serve_once() -> tuple[float, float, float, int]:
    Host.objects.filter(name="localhost").update(last_seen=None)
    port = free_port()
    started = time.monotonic()
    serve = start(["serve", "--port", str(port)])
    until(first_probe_seen)
    probe = time.monotonic() - started
    until(lambda: answers(f"http://127.0.0.1:{port}/accounts/login/"))
    page = time.monotonic() - started
    time.sleep(5)  # the workers are up and busy with the loop
    tree = session_members(serve.pid)
    stopping = time.monotonic()
    serve.send_signal(signal.SIGINT)
    serve.wait(timeout=60)
    stop = time.monotonic() - stopping
    left = [pid for pid in tree if pid in session_members(serve.pid)]
    return probe, page, stop, len(left)


def workers_recover() -> float:
    workers = start(["workers"], WORKERS_STALL_SECONDS="10", Q_RETRY="30")
    try:
        victims = until(lambda: len(found := cluster_workers(workers.pid)) == 3 and found)
        time.sleep(3)
        killed = time.monotonic()
        seen = Host.objects.values_list("last_seen", flat=True).get(name="localhost")
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        marker = DATA_DIR / "ran"
        marker.unlink(missing_ok=True)
        async_task("pathlib.Path.touch", marker)
        until(marker.exists, 180)
        until(lambda: Host.objects.filter(name="localhost", last_seen__gt=seen).exists(), 60)
        return time.monotonic() - killed
    finally:
        workers.send_signal(signal.SIGTERM)
        workers.wait(timeout=60)


def main(runs: int) -> None:
    call_command("migrate", verbosity=0)
    FakeGpus(DATA_DIR / "gpus", "local").set_gpus(
        ["0, GPU-bench0, 81559, 1024, 12, 3, 30, 70.5, NVIDIA H100 80GB HBM3"]
    )
    Host.objects.get_or_create(
        name="localhost", defaults={"address": "localhost", "transport": Host.Transport.LOCAL}
    )
    rows = [serve_once() for _ in range(runs)]
    print("run | first probe s | first page s | stop s (SIGINT) | processes left")
    for i, (probe, page, stop, left) in enumerate(rows, 1):
        print(f"{i} | {probe:.1f} | {page:.1f} | {stop:.1f} | {left}")
    for name, column in (("first probe", 0), ("first page", 1), ("stop", 2)):
        values = [row[column] for row in rows]
        print(f"{name}: median {statistics.median(values):.1f}s, max {max(values):.1f}s")
    print(f"all workers killed -> a new task ran and a probe stored: {workers_recover():.1f}s")
    print(f"(data dir {DATA_DIR}; load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
