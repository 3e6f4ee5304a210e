"""Benchmark: the monitoring loop against N simulated hosts, over real OpenSSH sshds.

Hosts are 127.0.x.y addresses served by sshds (16 addresses each); the fake nvidia-smi
(tests/fake_bin) tells them apart by $SSH_CONNECTION and reports 8 GPUs and 8 processes each.
The service (this process and its threads) is pinned to the first CPU and the simulated
hosts (sshds, their shells, the fake nvidia-smi) to the others (`sched_setaffinity`, as
`taskset` does), and the hosts' shells get a clean HOME, so the service's own CPU is
measured, not the hosts' start-up files. For each N it prints, on a fresh SQLite file
database, for each way of probing (--ways, interleaved, REPEATS rounds of CYCLES cycles):

- cycle s: the median wall time of one full cycle of the real loop (probe, parse, record,
  history, signal, publish), waiting for every host; cycles start every
  MONITORING_INTERVAL (2 s), as in the loop;
- CPU ms/host: the service's CPU time (user + system, all its threads, idle time between
  cycles included) per host per cycle.

Ways: `session` (the default loop: a probe session per host, steady probes recorded in
bulk), `one-shot` (a new channel and shell per probe, MONITORING_PROBE_SESSIONS off),
`per-host` (one-shot probes recorded one host and one GPU at a time, as before issue 18).

With --fresh it also times the TensorHive way (six separate commands over a fresh SSH login
each, concurrently across hosts) and a bare client's floor (bench/RESULTS.md, Probing).

Run: .venv/bin/python bench/monitoring_cycle.py [--fresh] [--ways a,b] [N ...]
(default N: 10 50 100 200). History is stored every cycle (the worst case) unless
--history-step says otherwise (the default setting is 10 s: one cycle in five).
"""

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["HIVE_DATA_DIR"] = tempfile.mkdtemp(prefix="hive-bench-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")

import django  # noqa: E402

django.setup()

import paramiko  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from simhosts import (  # noqa: E402
    GPUS_PER_HOST,
    SERVICE_CPUS,
    give_gpus,
    host_cpus,
    host_name,
    start_servers,
    stop,
)

from monitoring import parsers  # noqa: E402
from monitoring.connections import pool  # noqa: E402
from monitoring.keys import public_key_line, service_key_path  # noqa: E402
from monitoring.loop import ProbeLoop  # noqa: E402
from monitoring.models import Host  # noqa: E402
from monitoring.probes import probe_argv  # noqa: E402
from monitoring.transport import SSHTarget, SSHTransport, TransportError  # noqa: E402
from tests.realparts import Sshd  # noqa: E402

REPEATS = 3
CYCLES = 5
WAYS = ["session", "one-shot", "per-host"]


def setup_lab(max_hosts: int, workdir: Path, pids: list[int]) -> list[Sshd]:
    servers = start_servers(max_hosts, workdir, public_key_line())
    give_gpus(servers, workdir, pids)
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout
    for server in servers:
        for addr in server.addresses:
            Host.objects.create(
                name=host_name(addr),
                address=addr,
                port=server.port,
                username=user.strip(),
                enabled=False,
            )
    return servers


def timed(function, repeats=REPEATS) -> float:
    """Median wall time of function() in seconds."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def full_cycle(loop: ProbeLoop, n: int) -> None:
    recorded = loop.cycle()
    if len(recorded) != n:
        raise RuntimeError(f"cycle recorded {len(recorded)} of {n} hosts")


def warm_up(loop: ProbeLoop, n: int) -> None:
    """First contact: connect, record host keys, start sessions (hundreds of logins may
    outlast one cycle)."""
    seen = set()
    for _ in range(20):
        seen.update(loop.cycle())
        if len(seen) == n:
            return
    raise RuntimeError(f"only {len(seen)} of {n} hosts answered in 20 cycles")


@contextlib.contextmanager
def way(name: str):
    """Settings (and, for per-host, the old recording) of one way of probing."""
    settings.MONITORING_PROBE_SESSIONS = name == "session"
    if name != "per-host":
        yield
        return
    # Every probe recorded by record_probe, one host and one GPU at a time.
    with mock.patch("monitoring.loop.record_steady_probes", lambda finished, now: finished):
        yield


def measure(loop: ProbeLoop, n: int, name: str) -> tuple[list[float], float]:
    """CYCLES cycles, one every MONITORING_INTERVAL as the loop runs them (a longer cycle
    starts the next at once): their wall times, and the service's CPU seconds in all,
    idle time between cycles included."""
    walls = []
    with way(name):
        cpu = time.process_time()
        for _ in range(CYCLES):
            started = time.perf_counter()
            full_cycle(loop, n)
            walls.append(time.perf_counter() - started)
            time.sleep(max(0.0, settings.MONITORING_INTERVAL - walls[-1]))
        cpu = time.process_time() - cpu
    return walls, cpu


def bench_ways(n: int, ways: list[str]) -> dict:
    """Interleaved rounds of each way; its median cycle and CPU per host per cycle."""
    Host.objects.update(enabled=False)
    hosts = list(Host.objects.order_by("pk")[:n])
    Host.objects.filter(pk__in=[h.pk for h in hosts]).update(enabled=True)
    loops = {}
    for name in ways:
        loops[name] = ProbeLoop(holder=f"bench-{name}")
        loops[name].interval = 60.0  # wait for every host: we time the whole cycle
        with way(name):
            warm_up(loops[name], n)
    walls = {name: [] for name in ways}
    cpus = {name: [] for name in ways}
    for _ in range(REPEATS):
        for name in ways:
            wall, cpu = measure(loops[name], n, name)
            walls[name] += wall
            cpus[name].append(cpu / (CYCLES * n))
    for loop in loops.values():
        loop.close()
        loop.executor.shutdown(wait=True)
    pool.close()
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in ways}


# The probe as the loop sends it once a host's versions are known (see probes.probe_host).
STEADY_PROBE = probe_argv(settings.NVIDIA_SMI_TIMEOUT, versions=False)


def separate_commands(pids: list[int]) -> list[str]:
    """What the probe learns, asked as separate commands, as TensorHive's monitors ask it."""
    gpu_fields = ",".join(parsers.GPU_QUERY_FIELDS)
    app_fields = ",".join(parsers.APP_QUERY_FIELDS)
    return [
        f"nvidia-smi --query-gpu={gpu_fields} --format=csv,noheader,nounits",
        f"nvidia-smi --query-compute-apps={app_fields} --format=csv,noheader,nounits",
        f"ps -ww -o pid=,uid=,user:64=,args= -p {','.join(map(str, pids))}",
        "head -n1 /proc/stat; sleep 0.2; head -n1 /proc/stat",
        "grep -E '^(MemTotal|MemAvailable):' /proc/meminfo",
        "df -P -k -- / /home",
    ]


def fresh_connection_probe(hosts: list[Host], pids: list[int], failures: list) -> None:
    """Every command over a login of its own (concurrent across hosts, one host's commands
    one after the other). Commands that fail or time out are counted in ``failures``."""
    commands = separate_commands(pids)

    def probe(host):
        for command in commands:
            transport = SSHTransport(target(host))
            try:
                transport.run(["sh", "-c", command], timeout=30)
            except TransportError as exc:
                failures.append(exc)
            finally:
                transport.close()

    with ThreadPoolExecutor(len(hosts)) as executor:
        list(executor.map(probe, hosts))


def target(host: Host) -> SSHTarget:
    return SSHTarget(
        address=host.address,
        port=host.port,
        username=host.username,
        key_path=str(service_key_path()),
        connect_timeout=10,
    )


def bare_clients(hosts: list[Host]) -> list[paramiko.SSHClient]:
    clients = []
    for host in hosts:
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())  # noqa: S507 (loopback)
        client.connect(
            host.address,
            port=host.port,
            username=host.username,
            key_filename=str(service_key_path()),
            allow_agent=False,
            look_for_keys=False,
        )
        clients.append(client)
    return clients


def floor(clients: list[paramiko.SSHClient], executor: ThreadPoolExecutor) -> None:
    command = subprocess.list2cmdline(STEADY_PROBE)

    def send(client):
        _, stdout, _ = client.exec_command(command)  # noqa: S601 (fixed script)
        return stdout.read()

    list(executor.map(send, clients))


def bench_fresh(n: int, pids: list[int]) -> dict:
    """The --fresh columns: one command, fresh logins, the bare floor."""
    hosts = list(Host.objects.filter(enabled=True).order_by("pk"))
    one = timed(lambda: pool.run(hosts[0], ["true"]), repeats=20)
    failures = []
    fresh = timed(lambda: fresh_connection_probe(hosts, pids, failures), repeats=3)
    clients = bare_clients(hosts)
    with ThreadPoolExecutor(len(clients)) as executor:
        bare = timed(lambda: floor(clients, executor))
    for client in clients:
        client.close()
    pool.close()
    return {"one": one, "fresh": fresh, "failed": len(failures) // 3, "floor": bare}


def main(sizes: list[int], ways: list[str], fresh: bool, history_step: float) -> None:
    os.sched_setaffinity(0, SERVICE_CPUS)  # before any thread: they inherit it
    settings.MONITORING_HISTORY_STEP = history_step
    call_command("migrate", verbosity=0)
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(GPUS_PER_HOST)]
    workdir = Path(os.environ["HIVE_DATA_DIR"])
    servers = setup_lab(max(sizes), workdir, [p.pid for p in sleepers])
    print(
        f"{os.cpu_count()} CPUs (service on {sorted(SERVICE_CPUS)}, hosts on "
        f"{sorted(host_cpus())}), SQLite file database, {GPUS_PER_HOST} GPUs per host, "
        f"{REPEATS} interleaved rounds of {CYCLES} cycles, history step {history_step:g} s; "
        "load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print("    N  way        cycle s  CPU ms/host/cycle")
    try:
        for n in sizes:
            for name, (cycle, cpu) in bench_ways(n, ways).items():
                print(f"{n:5d}  {name:9s} {cycle:8.3f}  {1000 * cpu:17.2f}", flush=True)
            if fresh:
                r = bench_fresh(n, [p.pid for p in sleepers])
                print(
                    f"{n:5d}  one command {1000 * r['one']:.2f} ms, fresh logins "
                    f"{r['fresh']:.3f} s ({r['failed']} of {6 * n} failed), floor "
                    f"{r['floor']:.3f} s",
                    flush=True,
                )
            print(f"       load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for server in servers:
            stop(server)
        for proc in sleepers:
            proc.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[10, 50, 100, 200])
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--history-step", type=float, default=0.0)
    args = parser.parse_args()
    main(args.sizes, args.ways.split(","), args.fresh, args.history_step)
