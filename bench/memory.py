"""Benchmark: the memory of the whole service (`manage.py serve`: the web process and the
supervised django-q2 cluster) while idle, as RSS and as PSS (shared pages counted once).

Each checkout given (default: this one) is started with `manage.py serve` on a fresh SQLite
data dir seeded by `manage.py demo` (12 hosts, 96 GPUs with history, users, bookings, jobs),
plus host `localhost` probed with the fake nvidia-smi, so the probing loop runs every 2 s.
After `--settle` seconds each process of the service is read from /proc/PID/smaps_rollup:
RSS, PSS and USS (private pages); then the service is stopped with SIGINT. Checkouts are run
one after another, `--rounds` times, interleaved, so several trees compare on one machine.

Run: .venv/bin/python bench/memory.py [--settle 60] [--rounds 1] [CHECKOUT ...]
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("Rss", "Pss", "Private_Clean", "Private_Dirty")


def memory(pid: int) -> dict[str, float] | None:
    """MiB by smaps_rollup field; None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in FIELDS:
            values[name] = int(rest.split()[0]) / 1024
    return values


def descendants(pid: int) -> list[int]:
    """The process and everything it started (by parent pid, read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def name_of(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode(errors="replace") for w in words if w)
    for marker in ("qcluster", "daphne", "serve", "ssh", "screen"):
        if marker in text:
            return marker
    return Path(words[0].decode(errors="replace")).name if words and words[0] else "?"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def seeded_data_dir(checkout: Path, python: str) -> tuple[Path, dict]:
    data_dir = Path(tempfile.mkdtemp(prefix="hive-bench-memory-"))
    env = {
        **os.environ,
        "HIVE_DATA_DIR": str(data_dir),
        "FAKE_GPU_DIR": str(data_dir / "gpus"),
        "PATH": f"{checkout / 'tests' / 'fake_bin'}:{os.environ['PATH']}",
        "DJANGO_SETTINGS_MODULE": "hiveproject.settings",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    manage = [python, str(checkout / "manage.py")]
    for command in (["migrate", "-v0"], ["demo"], ["addhost", "localhost", "--local"]):
        subprocess.run(manage + command, env=env, cwd=checkout, check=True, capture_output=True)
    return data_dir, env


def measure(checkout: Path, python: str, settle: float) -> list[tuple[int, str, dict]]:
    data_dir, env = seeded_data_dir(checkout, python)
    serve = subprocess.Popen(
        [python, str(checkout / "manage.py"), "serve", "--port", str(free_port())],
        env=env,
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        time.sleep(settle)
        rows = []
        for pid in descendants(serve.pid):
            values = memory(pid)
            if values and name_of(pid) in ("serve", "daphne", "qcluster"):
                rows.append((pid, name_of(pid), values))
        return rows
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)


def report(checkout: Path, rows) -> None:
    print(f"\n{checkout}: {len(rows)} processes")
    print(f"{'pid':>8} {'process':10} {'RSS MiB':>8} {'PSS MiB':>8} {'USS MiB':>8}")
    totals = [0.0, 0.0, 0.0]
    for pid, name, v in rows:
        uss = v["Private_Clean"] + v["Private_Dirty"]
        for i, value in enumerate((v["Rss"], v["Pss"], uss)):
            totals[i] += value
        print(f"{pid:>8} {name:10} {v['Rss']:8.0f} {v['Pss']:8.0f} {uss:8.0f}")
    print(f"{'':8} {'total':10} {totals[0]:8.0f} {totals[1]:8.0f} {totals[2]:8.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[ROOT])
    parser.add_argument("--settle", type=float, default=60, help="seconds before reading")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    for _ in range(args.rounds):
        for checkout in args.checkouts:
            report(checkout, measure(checkout.resolve(), args.python, args.settle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
