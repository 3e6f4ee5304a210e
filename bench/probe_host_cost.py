"""Benchmark: what one probe sample costs the GPU server it runs on.

Runs the probe session's remote loop (``monitoring.probes.SESSION_SCRIPT``) as the service
starts it (``sh -c SCRIPT probe-session TIMEOUT PATHS...``), but locally instead of over SSH,
and asks it for N samples, as a cycle does; the host has 8 fake GPUs (tests/fake_bin's
nvidia-smi) with one real process on each, and the default disk paths. Reports, per sample:
the CPU time (user + system) of the loop and everything it started, and the processes it
started (counted with strace, when installed). With --baseline DIR, DIR's script (another
checkout) runs in the same rounds, the two taking turns, so the ratio holds under load.
With --other-processes N, N more sleeping processes stand for the host's other work (a busy
GPU server runs hundreds: data loader workers, shells, daemons), which a `ps` that reads
every process pays for.

Run: .venv/bin/python bench/probe_host_cost.py [--samples 200] [--rounds 3] [--baseline DIR]
[--other-processes N]
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FAKE_BIN = ROOT / "tests" / "fake_bin"

from simhosts import gpu_rows  # noqa: E402  (the benchmarks' simulated hosts' GPUs)

from tests.realparts import FakeGpus  # noqa: E402

END = b"@@end\n"


def session_script(tree: Path) -> str:
    """The remote loop of the checkout at ``tree``, read in a process of its own (its
    modules and ours have the same names)."""
    code = (
        "import sys, django; django.setup(); from monitoring.probes import SESSION_SCRIPT; "
        "sys.stdout.write(SESSION_SCRIPT)"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="hiveproject.settings")
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, text=True, capture_output=True, check=True
    ).stdout


def fake_host(workdir: Path, pids: list[int]) -> dict:
    """The environment of a host with 8 fake GPUs, one of ``pids`` on each."""
    fake = FakeGpus(workdir / "gpus", "local")  # the name the fake uses without SSH
    fake.set_gpus(gpu_rows("127.0.0.1"))
    uuids = [row.split(", ")[1] for row in gpu_rows("127.0.0.1")]
    fake.set_processes([f"{u}, {pid}, 500, python" for u, pid in zip(uuids, pids, strict=True)])
    env = {k: v for k, v in os.environ.items() if k != "SSH_CONNECTION"}
    env.update(FAKE_GPU_DIR=str(workdir / "gpus"), PATH=f"{FAKE_BIN}:{os.environ['PATH']}")
    return env


def run_samples(script: str, samples: int, env: dict, trace: Path | None) -> tuple[float, int]:
    """(CPU seconds of the loop and its processes, processes started) for ``samples``."""
    argv = ["sh", "-c", script, "probe-session", "10", "/", "/home"]
    if trace:
        argv = ["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(trace), *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    loop = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    for _ in range(samples):
        loop.stdin.write(b"0\n")
        loop.stdin.flush()
        answer = b""
        while not answer.endswith(END):
            answer += loop.stdout.readline()
        if b"@@gpus 0" not in answer:
            raise RuntimeError(f"a sample failed:\n{answer.decode()}")
    loop.stdin.close()
    loop.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    started = 0
    if trace:
        # Successful execve lines (a PATH search fails on the earlier folders first): the
        # loop's own sh, then every program each sample ran.
        lines = trace.read_text().splitlines()
        started = sum(1 for line in lines if "execve(" in line and line.endswith("= 0")) - 1
    return cpu, started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout, measured alongside")
    parser.add_argument("--other-processes", type=int, default=0, help="the host's other work")
    args = parser.parse_args()
    trees = {"this checkout": ROOT}
    if args.baseline:
        trees["baseline"] = args.baseline.resolve()
    scripts = {name: session_script(tree) for name, tree in trees.items()}
    workdir = Path(tempfile.mkdtemp(prefix="hive-bench-probe-"))
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(8 + args.other_processes)]
    try:
        env = fake_host(workdir, [s.pid for s in sleepers[:8]])
        trace = workdir / "trace" if shutil.which("strace") else None
        per_sample = {name: [] for name in scripts}
        started = {}
        for name, script in scripts.items():  # processes per sample: once, under strace
            started[name] = run_samples(script, 20, env, trace)[1] / 20 if trace else None
        for round_ in range(args.rounds):
            order = list(scripts) if round_ % 2 == 0 else list(scripts)[::-1]
            for name in order:
                cpu, _ = run_samples(scripts[name], args.samples, env, None)
                per_sample[name].append(1000 * cpu / args.samples)
            load = os.getloadavg()[0]
            print(
                f"round {round_ + 1}: load {load:.1f}, "
                + ", ".join(f"{n} {per_sample[n][-1]:.2f} ms" for n in order)
            )
        print(
            f"\n{args.samples} samples per round, 8 GPUs with a process each, 2 disk paths, "
            f"{args.other_processes} other processes:"
        )
        print(f"{'':>16} {'CPU ms per sample (median)':>28} {'processes per sample':>22}")
        for name in scripts:
            count = "-" if started[name] is None else f"{started[name]:.1f}"
            print(f"{name:>16} {statistics.median(per_sample[name]):>28.2f} {count:>22}")
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
