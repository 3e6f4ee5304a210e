"""Simulated GPU hosts for benchmarks, without Django: 127.0.x.y addresses served by real
OpenSSH sshds (16 addresses each, OpenSSH's limit), each address a host whose fake
`nvidia-smi` (tests/fake_bin) reports 8 GPUs and a process on each. The sshds run on the CPUs
the service does not (`SERVICE_CPUS`), and their shells get a clean HOME, so a benchmark
measures the service and not the account's start-up files."""

import os
from pathlib import Path

from tests.realparts import FakeGpus, Sshd

GPUS_PER_HOST = 8
# OpenSSH listens on at most 16 addresses per server (MAX_LISTEN_SOCKS).
ADDRESSES_PER_SSHD = 16
SERVICE_CPUS = {0}


def address(i: int) -> str:
    """The i-th simulated host's address (0-based): 127.0.0.1..250, then 127.0.1.1...."""
    return f"127.0.{i // 250}.{i % 250 + 1}"


def host_name(addr: str) -> str:
    return f"node-{addr.replace('.', '-')}"


def gpu_rows(address: str) -> list[str]:
    _, _, third, last = address.split(".")
    return [
        f"{i}, GPU-{int(third):02d}{int(last):03d}-{i:04d}, 81920, {1000 + i}, {i * 10}, 3, "
        f"{40 + i}, 250.5, NVIDIA H100 80GB HBM3"
        for i in range(GPUS_PER_HOST)
    ]


def host_cpus() -> set[int]:
    """The CPUs the simulated hosts run on: all but the service's (all, on one CPU)."""
    return (os.sched_getaffinity(0) | set(range(os.cpu_count()))) - SERVICE_CPUS or {0}


def start_servers(hosts: int, workdir: Path, public_key: str) -> list[Sshd]:
    """Enough sshds for ``hosts`` addresses, each on its own port, authorizing the service's
    key, on the hosts' CPUs; their fake GPUs are read from workdir/gpus (``give_gpus``)."""
    fake_root = workdir / "gpus"
    home = workdir / "home"
    home.mkdir(parents=True)
    servers = []
    for first in range(0, hosts, ADDRESSES_PER_SSHD):
        last = min(first + ADDRESSES_PER_SSHD, hosts)
        server = Sshd(workdir / f"sshd-{first}", public_key, fake_root, addresses=1)
        server.addresses = [address(i) for i in range(first, last)]
        config = server._config().replace("SetEnv PATH=", f"SetEnv HOME={home} PATH=")
        server.config.write_text(config)
        servers.append(server.start())
        os.sched_setaffinity(server.proc.pid, host_cpus())
    return servers


def give_gpus(servers: list[Sshd], workdir: Path, pids: list[int]) -> None:
    """Each address's fake GPUs, one process of ``pids`` (real processes) on each GPU."""
    for server in servers:
        for addr in server.addresses:
            give_host_gpus(workdir / "gpus", addr, gpu_rows(addr), pids)


def give_host_gpus(gpu_dir: Path, host: str, rows: list[str], pids: list[int]) -> None:
    """One fake nvidia-smi host's GPUs (``host``: an address, or "local" for `localhost`)."""
    fake = FakeGpus(gpu_dir, host)
    fake.set_gpus(rows)
    uuids = [row.split(", ")[1] for row in rows]
    fake.set_processes([f"{u}, {p}, 500, python" for u, p in zip(uuids, pids, strict=True)])


def stop(server: Sshd) -> None:
    """Stop the server even when one of its connections ended while being signalled."""
    try:
        server.stop()
    except ProcessLookupError:
        server.proc.terminate()
        server.proc.wait(timeout=10)
