"""Benchmark: one monitoring cycle against N simulated hosts, over one real OpenSSH sshd.

Hosts are 127.0.0.1..N pointing at the same sshd; the fake nvidia-smi (tests/fake_bin)
tells them apart by $SSH_CONNECTION and reports 8 GPUs and 8 processes each. For each N it
prints, in one run and on a fresh SQLite file database:

- cycle: one full cycle of the real loop (probe, parse, record, bulk-insert history,
  signal, publish), all hosts over their persistent connections;
- 1 cmd: one command (`true`) over an already open connection;
- fresh: the same facts asked the TensorHive/gputasker way, as six separate commands
  (GPUs, GPU processes, ps, CPU, RAM, disks) with a fresh SSH login for each (concurrent
  across hosts, so this is that way's best case); "failed" counts its commands per round
  (of 6 × N) that failed or did not answer within 30 s;
- floor: the same probe script sent concurrently to all N hosts over already-open
  connections by a bare paramiko client that neither parses nor stores.

Run: .venv/bin/python bench/monitoring_cycle.py [N ...]   (default 1 10 50 100)
The probe script itself sleeps 0.2 s on the host to measure CPU utilisation, so no cycle
can be shorter than that.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["HIVE_DATA_DIR"] = tempfile.mkdtemp(prefix="hive-bench-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")

import django  # noqa: E402

django.setup()

import paramiko  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from monitoring import parsers  # noqa: E402
from monitoring.connections import pool  # noqa: E402
from monitoring.keys import public_key_line, service_key_path  # noqa: E402
from monitoring.loop import ProbeLoop  # noqa: E402
from monitoring.models import GpuMetric, Host  # noqa: E402
from monitoring.probes import probe_argv  # noqa: E402
from monitoring.transport import SSHTarget, SSHTransport, TransportError  # noqa: E402
from tests.realparts import FakeGpus, Sshd  # noqa: E402

GPUS_PER_HOST = 8
REPEATS = 3


def gpu_rows(address: str) -> list[str]:
    last = int(address.rsplit(".", 1)[1])
    return [
        f"{i}, GPU-{last:04d}-{i:04d}, 81920, {1000 + i}, {i * 10}, 3, {40 + i}, 250.5, "
        "NVIDIA H100 80GB HBM3"
        for i in range(GPUS_PER_HOST)
    ]


# OpenSSH listens on at most 16 addresses per server (MAX_LISTEN_SOCKS).
ADDRESSES_PER_SSHD = 16


def start_servers(max_hosts: int, workdir: Path, fake_root: Path) -> list[Sshd]:
    """Enough sshds for 127.0.0.1..max_hosts, each on its own port."""
    servers = []
    for first in range(1, max_hosts + 1, ADDRESSES_PER_SSHD):
        last = min(first + ADDRESSES_PER_SSHD - 1, max_hosts)
        server = Sshd(workdir / f"sshd-{first}", public_key_line(), fake_root, addresses=1)
        server.addresses = [f"127.0.0.{i}" for i in range(first, last + 1)]
        server.config.write_text(server._config())
        servers.append(server.start())
    return servers


def setup_lab(max_hosts: int, workdir: Path, pids: list[int]) -> list[Sshd]:
    fake_root = workdir / "gpus"
    servers = start_servers(max_hosts, workdir, fake_root)
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout
    for server in servers:
        for address in server.addresses:
            fake = FakeGpus(fake_root, address)
            fake.set_gpus(gpu_rows(address))
            uuids = [row.split(", ")[1] for row in gpu_rows(address)]
            apps = [f"{u}, {pid}, 500, python" for u, pid in zip(uuids, pids, strict=True)]
            fake.set_processes(apps)
            Host.objects.create(
                name=f"node-{address.replace('.', '-')}",
                address=address,
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


def bench(n: int, pids: list[int]) -> dict:
    Host.objects.update(enabled=False)
    hosts = list(Host.objects.order_by("pk")[:n])
    Host.objects.filter(pk__in=[h.pk for h in hosts]).update(enabled=True)
    loop = ProbeLoop(holder="bench")
    loop.interval = 60.0  # wait for every host: we time the whole cycle
    full_cycle(loop, n)  # first contact: connect, record host keys
    rows_before = GpuMetric.objects.count()
    cycle = timed(lambda: full_cycle(loop, n))
    stored = (GpuMetric.objects.count() - rows_before) // REPEATS
    one = timed(lambda: pool.run(hosts[0], ["true"]), repeats=20)
    hosts = list(Host.objects.filter(pk__in=[h.pk for h in hosts]))
    failures = []
    fresh = timed(lambda: fresh_connection_probe(hosts, pids, failures), repeats=3)
    clients = bare_clients(hosts)
    with ThreadPoolExecutor(len(clients)) as executor:
        bare = timed(lambda: floor(clients, executor))
    for client in clients:
        client.close()
    loop.executor.shutdown(wait=True)
    pool.close()
    return {
        "n": n,
        "cycle": cycle,
        "one": one,
        "fresh": fresh,
        "failed": len(failures) // 3,
        "floor": bare,
        "rows": stored,
    }


def stop(sshd: Sshd) -> None:
    """Stop the server even when one of its connections ended while being signalled."""
    try:
        sshd.stop()
    except ProcessLookupError:
        sshd.proc.terminate()
        sshd.proc.wait(timeout=10)


def main(sizes: list[int]) -> None:
    settings.MONITORING_HISTORY_STEP = 0  # store history every cycle, the worst case
    call_command("migrate", verbosity=0)
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(GPUS_PER_HOST)]
    workdir = Path(os.environ["HIVE_DATA_DIR"])
    servers = setup_lab(max(sizes), workdir, [p.pid for p in sleepers])
    print(f"{os.cpu_count()} CPUs, SQLite file database, {GPUS_PER_HOST} GPUs per host")
    print(
        "    N   cycle s  1 cmd ms   fresh s  failed   floor s  cycle/floor  fresh/cycle  GPU rows"
    )
    try:
        for n in sizes:
            r = bench(n, [p.pid for p in sleepers])
            print(
                f"{r['n']:5d}  {r['cycle']:8.3f}  {1000 * r['one']:8.2f}  {r['fresh']:8.3f}"
                f"  {r['failed']:6d}  {r['floor']:8.3f}  {r['cycle'] / r['floor']:11.2f}"
                f"  {r['fresh'] / r['cycle']:11.1f}  {r['rows']:8d}",
                flush=True,
            )
    finally:
        for server in servers:
            stop(server)
        for proc in sleepers:
            proc.kill()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 10, 50, 100])
