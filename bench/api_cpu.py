"""Benchmark: the web process's CPU per API request, this checkout against another, over HTTP.

Each checkout serves bench/api_side_by_side.py's data (64 GPUs, 5,000 one-GPU bookings) from
its own web server on its own SQLite database (or, with --postgres, a PostgreSQL database of
its own), as api_side_by_side runs ours. Both servers run on the first CPU and the client
(this process, one keep-alive connection each) on the second, so the client takes nothing
from them; PostgreSQL's own processes are not pinned, and their CPU is not counted. For each
request, in turn on each server (the first server alternating by round): 10 requests to warm
up, then requests for SECONDS, and the server process's CPU time (user + system, /proc)
divided by their number.

Requests, by name:

- week: the bookings of 8 GPUs over this week, as api_side_by_side asks for it (275);
- page100: the 20th page of the whole list at the default size (100);
- page1000: the 3rd page of 1,000;
- root: the API root (authentication, routing and rendering, no query of its own).

A small change to a request's CPU shows here where api_side_by_side's rates, a few dozen
requests a round beside TensorHive, cannot resolve it. Prints the medians over the rounds,
the ratio (baseline / this: > 1 means this checkout spends less) and every round's figure.

Run: .venv/bin/python bench/api_cpu.py BASELINE_DIR [--rounds 6] [--seconds 3]
        [--requests week page100 page1000 root]
        [--postgres postgres://root@127.0.0.1:5432/hive_api_cpu]
BASELINE_DIR: another checkout, e.g. `git archive COMMIT | tar -x -C DIR` with a `.venv` link.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import api_side_by_side as side  # noqa: E402
from tensorhive import dataset  # noqa: E402

PATHS = {
    "page100": "/api/reservations/?page=20",
    "page1000": "/api/reservations/?page_size=1000&page=3",
    "root": "/api/",
}


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of the process (daphne's request threads start later and inherit it)."""
    for thread in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(thread), cpus)


def cpu_per_request(service, path: str, seconds: float) -> float:
    client = service.client()
    for _ in range(10):
        client.ok("GET", path)
    started, count = time.monotonic(), 0
    before = side.cpu_seconds(service.pid)
    while time.monotonic() - started < seconds:
        client.ok("GET", path)
        count += 1
    return (side.cpu_seconds(service.pid) - before) * 1000 / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--requests", nargs="+", default=["week", *PATHS])
    parser.add_argument(
        "--postgres",
        help="a PostgreSQL URL whose database name each checkout gets a database after "
        "(NAME_this, NAME_baseline, made anew) instead of SQLite",
    )
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs two CPUs: the servers on one, the client on another")
    work = Path(tempfile.mkdtemp(prefix="hive-api-cpu-"))
    now = datetime.now(UTC).replace(tzinfo=None)
    monday = now.replace(hour=0, minute=30, second=0, microsecond=0) - timedelta(now.weekday())
    services, processes = [], []
    try:
        for name, root in (("this", HERE.parent), ("baseline", args.baseline.resolve())):
            database = args.postgres and f"{args.postgres}_{name}"
            service = side.Ours(name, side.our_environment(work / name, database), work, root)
            processes.append(service.launch(dataset.origin(now)))
            service.pid = processes[-1].pid
            pin(service.pid, {0})
            services.append(service)
        os.sched_setaffinity(0, {1})
        cpu = {(s.name, r): [] for s in services for r in args.requests}
        for number in range(args.rounds):
            order = services if number % 2 == 0 else services[::-1]
            for request in args.requests:
                for service in order:
                    path = PATHS.get(request) or service.week_path(monday, monday + timedelta(7))
                    cpu[service.name, request].append(cpu_per_request(service, path, args.seconds))
        print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}")
        print("| request | this: CPU ms | baseline: CPU ms | baseline / this |")
        print("|---|---|---|---|")
        for request in args.requests:
            ours, base = cpu["this", request], cpu["baseline", request]
            mine, theirs = statistics.median(ours), statistics.median(base)
            print(f"| {request} | {mine:.2f} | {theirs:.2f} | {theirs / mine:.3f}× |")
        for (name, request), figures in cpu.items():
            print(f"{name} {request}: {' '.join(f'{x:.2f}' for x in figures)}")
    finally:
        for process in processes:
            side.stop(process)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
