"""Benchmark: gpurun against simple_gpu_scheduler, and the queue's dispatch latency.

1. 200 commands of `sleep 0.2` over 4 GPUs (host `localhost`, local transport, fake
   nvidia-smi) through `manage.py gpurun` (each command a task in GNU screen, recorded in
   the database, the GPU re-checked before each start) and through the real
   `simple_gpu_scheduler` from PyPI (bench/requirements.txt; plain subprocesses, no checks).
   Makespan is measured from the first start to the last end as each tool prints them,
   and also as the whole command's wall time (gpurun's includes starting Django).
   Overhead is relative to the ideal 200 x 0.2 s / 4 = 10 s.
2. The queue, as in production: a django-q2 cluster (`manage.py qcluster`, ORM broker,
   SQLite in WAL mode) runs the leased probing loop every MONITORING_INTERVAL (2 s) and the
   scheduler after each cycle. 16 queued one-GPU jobs of `sleep 1` share the 4 GPUs; each
   command prints its own start and end times, and the dispatch latency is the time from a
   job's end on a GPU to the next job's start on that GPU.

Run: .venv/bin/python bench/queue_gpurun.py [commands] [--hog] [--rounds N] [--no-queue]
  --hog: a fixed background load during part 1, the same for both tools: one busy-looping
         process per core (nice 0), started before and stopped after each round.
  --rounds N: N interleaved rounds of the two tools (default 1), each reported.
  --gpurun-from DIR: also run DIR's gpurun (another checkout, e.g. `git archive main`
         unpacked, with .venv linked) in each round, beside this one's: what a change gave.
  --smi-on-task-path: as on a real host, the task's account finds nvidia-smi on its PATH
         (reset to the system's, where the fake is not): the fake is put in /usr/local/bin
         for the run (root only; refused if one is there), so gpurun's wait call brings its
         answer and gpurun does not ask separately. Tests running beside would see it.
Each tool's CPU time (user+sys) comes from wait4() on its process, its children included
(gpurun's screen sessions and shells, simple_gpu_scheduler's shells); its peak RSS (the
largest single process) from GNU time (/usr/bin/time).
"""

import argparse
import getpass
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA_DIR = Path(tempfile.mkdtemp(prefix="hive-bench-queue-"))
FAKE_BIN = ROOT / "tests" / "fake_bin"
os.environ.update(
    HIVE_DATA_DIR=str(DATA_DIR),
    FAKE_GPU_DIR=str(DATA_DIR / "gpus"),
    JOBS_LOG_DIR=str(DATA_DIR / "logs"),
    PATH=f"{FAKE_BIN}:{os.environ['PATH']}",
    DJANGO_SETTINGS_MODULE="hiveproject.settings",
    LOG_LEVEL="WARNING",
)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django_q.tasks import async_task  # noqa: E402

from accesscontrol.models import RunAsAllowance  # noqa: E402
from accesscontrol.services import ensure_default_group, profile_for  # noqa: E402
from core.models import Activity  # noqa: E402
from jobs.models import Task  # noqa: E402
from monitoring.inventory import probe_and_record  # noqa: E402
from monitoring.models import Host  # noqa: E402
from queueing import services  # noqa: E402
from queueing.models import QueuedJob  # noqa: E402

GPUS = 4
TIME = re.compile(r"^(\d+\.\d+)")


def set_up_lab() -> None:
    call_command("migrate", verbosity=0)
    gpus = DATA_DIR / "gpus" / "local"
    gpus.mkdir(parents=True)
    (gpus / "query-gpu.csv").write_text(
        "".join(
            f"{i}, GPU-local-{i}, 15360, 0, 0, 0, 30, 20.0, [N/A], Tesla T4\n" for i in range(GPUS)
        )
    )
    (gpus / "query-compute-apps.csv").write_text("")
    user = get_user_model().objects.create_user(
        getpass.getuser(), "bench@example.org", "pw-bench-1"
    )
    profile = profile_for(user)
    profile.unix_username = user.username  # its tasks run as the account running the bench
    profile.save()
    ensure_default_group()
    host = Host.objects.create(name="localhost", address="127.0.0.1", transport="local")
    # Tasks run locally as the account running the bench: the service's own (and root when
    # run as root), which the run-as rule refuses unless an admin allows it.
    RunAsAllowance.objects.create(unix_username=getpass.getuser(), reason="benchmark")
    probe_and_record(host)


TASK_PATH_SMI = Path("/usr/local/bin/nvidia-smi")  # on setpriv --reset-env's PATH


@contextmanager
def smi_on_task_path():
    """The fake nvidia-smi where a task's account looks for it (its PATH is the system's)."""
    if os.geteuid() != 0:
        raise SystemExit("--smi-on-task-path needs root (it writes to /usr/local/bin)")
    if TASK_PATH_SMI.exists():
        raise SystemExit(f"--smi-on-task-path: {TASK_PATH_SMI} is there already; not replaced")
    fake, gpus = shlex.quote(str(FAKE_BIN / "nvidia-smi")), shlex.quote(str(DATA_DIR / "gpus"))
    TASK_PATH_SMI.write_text(f'#!/bin/sh\nFAKE_GPU_DIR={gpus} exec {fake} "$@"\n')
    TASK_PATH_SMI.chmod(0o755)
    try:
        yield
    finally:
        TASK_PATH_SMI.unlink()


def timed_lines(
    argv: list[str], stdin: str, cwd: Path = ROOT
) -> tuple[float, list[tuple[float, str]], dict]:
    """Run a command, feeding stdin; (wall seconds, [(time seen, line)] of its stdout,
    {"cpu": user+sys seconds, "rss_mb": peak RSS} from wait4)."""
    # GNU time reports the peak RSS: the tool forks from it, not from this (large) process,
    # whose pages a forked child would count as its own peak.
    peak_file = DATA_DIR / "peak-rss"
    started = time.monotonic()
    proc = subprocess.Popen(
        ["/usr/bin/time", "-f", "%M", "-o", str(peak_file), *argv],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    proc.stdin.write(stdin)
    proc.stdin.close()
    lines = [(time.monotonic(), line.rstrip()) for line in proc.stdout]
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    lines.append((time.monotonic(), "<exit>"))
    peak_kb = int(peak_file.read_text().split()[-1])
    cost = {"cpu": usage.ru_utime + usage.ru_stime, "rss_mb": peak_kb / 1024}
    return time.monotonic() - started, lines, cost


def gpurun(count: int, tree: Path = ROOT) -> dict:
    """``tree``: the checkout whose gpurun runs (another one's, to compare two versions)."""
    wall, lines, cost = timed_lines(
        [sys.executable, str(tree / "manage.py"), "gpurun", "--gpus", "0,1,2,3"]
        + ["--user", getpass.getuser()],
        "sleep 0.2\n" * count,
        cwd=tree,
    )
    starts = [t for t, line in lines if line.startswith("started")]
    ends = [t for t, line in lines if line.startswith("finished")]
    assert len(starts) == len(ends) == count, lines[-3:]
    return {"makespan": ends[-1] - starts[0], "wall": wall, **cost}


def simple_gpu_scheduler(count: int) -> dict:
    """It prints a line per start and nothing at the end: the makespan ends with it."""
    # In this venv, or in the load test's tool venv (bench/load/run.sh installs it there).
    venvs = [Path(sys.executable).parent, ROOT / "data" / "load" / "venv" / "bin"]
    command = shutil.which("simple_gpu_scheduler", path=os.pathsep.join(map(str, venvs)))
    if command is None:
        raise SystemExit("pip install -r bench/requirements.txt (simple_gpu_scheduler)")
    wall, lines, cost = timed_lines([command, "--gpus", "0,1,2,3"], "sleep 0.2\n" * count)
    finished = lines[-1][0]  # it exits when its last command has ended
    starts = [t for t, line in lines if line.startswith("Processing command")]
    assert len(starts) == count, lines[-3:]
    return {"makespan": finished - starts[0], "wall": wall, **cost}


def report_runs(count: int, results: dict[str, dict]) -> None:
    ideal = count * 0.2 / GPUS
    print(f"\n{count} x `sleep 0.2` over {GPUS} GPUs (ideal {ideal:g} s):")
    print(
        f"{'':22}{'makespan s':>11}{'overhead':>10}{'wall s':>8}{'overhead':>10}"
        f"{'CPU s':>7}{'peak MB':>9}"
    )
    for name, r in results.items():
        print(
            f"{name:22}{r['makespan']:11.2f}{r['makespan'] / ideal - 1:10.0%}"
            f"{r['wall']:8.2f}{r['wall'] / ideal - 1:10.0%}{r['cpu']:7.2f}{r['rss_mb']:9.0f}"
        )
    base = results["simple_gpu_scheduler"]["makespan"]
    for name, r in results.items():
        if name != "simple_gpu_scheduler":
            print(f"makespan ratio {name} / simple_gpu_scheduler: {r['makespan'] / base:.2f}")


class Hog:
    """One busy-looping process per core: the same background load for both tools."""

    def __enter__(self):
        spin = "while True: pass"
        self.procs = [
            subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)
        ]
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
            proc.wait()


# --- the queue's dispatch latency ------------------------------------------------------------


def start_cluster() -> subprocess.Popen:
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=open(DATA_DIR / "qcluster.log", "w"),  # noqa: SIM115
    )
    async_task("monitoring.loop.run_probe_loop")
    return cluster


def stop_cluster(cluster: subprocess.Popen) -> None:
    os.killpg(cluster.pid, signal.SIGKILL)
    cluster.wait()
    Activity.objects.filter(name="probe-loop").update(holder="", lease_expires=None)


def queue_latency(jobs: int = 16) -> list[float]:
    owner = get_user_model().objects.get(username=getpass.getuser())
    # The command prints when it starts and ends (the window's shell logs both).
    stamp = "python3 -c \"import time; print(f'{time.time():.3f}')\""
    command = f"{stamp}; sleep 1; {stamp}"
    cluster = start_cluster()
    try:
        for i in range(jobs):
            services.enqueue(
                owner,
                name=f"bench {i}",
                tasks=[
                    services.TaskRequest(template=command.replace("{", "{{").replace("}", "}}"))
                ],
            )
        deadline = time.monotonic() + 30 + jobs * 5
        while QueuedJob.objects.exclude(state=QueuedJob.State.FINISHED).exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"queue did not finish; see {DATA_DIR / 'qcluster.log'}")
            time.sleep(0.2)
    finally:
        stop_cluster(cluster)
    return latencies()


def latencies() -> list[float]:
    per_gpu: dict[str, list[tuple[float, float]]] = {}
    for task in Task.objects.filter(job__queue_run__isnull=False).prefetch_related("devices"):
        start, end = (
            float(m[1]) for m in map(TIME.match, Path(task.log_path).read_text().split()) if m
        )
        per_gpu.setdefault(task.devices.get().uuid, []).append((start, end))
    gaps = []
    for runs in per_gpu.values():
        runs.sort()
        gaps += [nxt[0] - prev[1] for prev, nxt in zip(runs, runs[1:], strict=False)]
    return gaps


def main(count: int, hog: bool, rounds: int, queue: bool, others: list[Path], smi: bool) -> None:
    set_up_lab()
    with smi_on_task_path() if smi else nullcontext():
        compare(count, hog, rounds, others)
    if not queue:
        return
    gaps = queue_latency()
    print(
        f"\nqueue: {len(gaps)} GPU handovers, monitoring interval "
        f"{settings.MONITORING_INTERVAL:g} s; from a job's end to the next start on its GPU:"
    )
    print(f"  median {statistics.median(gaps):.2f} s, max {max(gaps):.2f} s, min {min(gaps):.2f} s")


def compare(count: int, hog: bool, rounds: int, others: list[Path]) -> None:
    """gpurun (and other checkouts' gpurun) against simple_gpu_scheduler, interleaved."""
    tools = [("gpurun", gpurun)]
    tools += [(f"gpurun@{tree.name}", partial(gpurun, tree=tree)) for tree in others]
    tools += [("simple_gpu_scheduler", simple_gpu_scheduler)]
    for round_ in range(rounds):
        results = {}
        for name, tool in tools:
            with Hog() if hog else nullcontext():
                load = os.getloadavg()[0]
                results[name] = tool(count)
        print(f"\nround {round_ + 1}, {'a CPU hog per core' if hog else 'no hog'}, load {load:.1f}")
        report_runs(count, results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commands", nargs="?", type=int, default=200)
    parser.add_argument("--hog", action="store_true")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-queue", dest="queue", action="store_false")
    parser.add_argument(
        "--gpurun-from",
        dest="others",
        type=Path,
        action="append",
        default=[],
        help="also run the gpurun of this checkout (e.g. an export of main), interleaved",
    )
    parser.add_argument(
        "--smi-on-task-path",
        dest="smi",
        action="store_true",
        help="the fake nvidia-smi in /usr/local/bin for the run, as on a real host (root)",
    )
    args = parser.parse_args()
    main(args.commands, args.hog, args.rounds, args.queue, args.others, args.smi)
