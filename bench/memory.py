"""Benchmark: the memory of the whole service (`manage.py serve`: the web process and the
supervised django-q2 cluster) while idle, as RSS and as PSS (shared pages counted once).

Each checkout given (default: this one) is started with `manage.py serve` on a fresh SQLite
data dir seeded by `manage.py demo` (12 hosts, 96 GPUs with history, users, bookings, jobs),
plus host `localhost` probed with the fake nvidia-smi, so the probing loop runs every 2 s.
With `--ssh-hosts N`, N simulated hosts too (bench/simhosts.py: real sshds on loopback, 8
GPUs each, a probe session per host), added with `manage.py addhost --file`.
Once the web process answers, it is asked for the login page, the API root and /healthz, as a
first user would (until then it has not loaded its URLs and views); after `--settle` seconds
from the start each process of the service is read from /proc/PID/smaps_rollup:
RSS, PSS and USS (private pages); then the service is stopped with SIGINT. Checkouts are run
one after another, `--rounds` times, interleaved, so several trees compare on one machine.
PSS is the figure to judge by: it counts a page shared by several processes once, split
between them, as the machine's memory holds it.

With `--tensorhive-venv VENV`, each round also starts TensorHive 1.1.0's API server as
bench/api_side_by_side.py does (bench/tensorhive/setup.sh: one process, its SQLite database
filled with the same 5,000 bookings), asks it for its reservations once, and reads its PSS
after the same settle time: the process that answers TensorHive's API, beside ours.

Run: .venv/bin/python bench/memory.py [--settle 60] [--rounds 1] [--ssh-hosts N]
        [--tensorhive-venv /tmp/tensorhive-venv] [CHECKOUT ...]
"""

import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simhosts import (  # noqa: E402
    give_gpus,
    give_host_gpus,
    gpu_rows,
    host_name,
    start_servers,
    stop,
)

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
    if "core.webserver" in text:  # the bounded daphne `serve` runs
        return "daphne"
    for marker in ("qcluster", "daphne", "serve", "ssh", "screen"):
        if marker in text:
            return marker
    return Path(words[0].decode(errors="replace")).name if words and words[0] else "?"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def seeded_data_dir(checkout: Path, python: str, ssh_hosts: int) -> tuple[Path, dict, list]:
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
    # localhost's 8 GPUs, each with this process on it (without them its probe is an error);
    # their UUIDs those of an address no simulated host has (x.x.x.0).
    give_host_gpus(data_dir / "gpus", "local", gpu_rows("127.0.0.0"), [os.getpid()] * 8)
    servers = add_ssh_hosts(manage, env, checkout, data_dir, ssh_hosts) if ssh_hosts else []
    return data_dir, env, servers


def add_ssh_hosts(manage, env, checkout: Path, data_dir: Path, hosts: int) -> list:
    """Simulated hosts authorizing the service's key, each a [table] of a hosts file."""
    key = subprocess.run(
        [*manage, "sshkey"], env=env, cwd=checkout, check=True, capture_output=True, text=True
    ).stdout.strip()
    servers = start_servers(hosts, data_dir / "lab", key)
    give_gpus(servers, data_dir / "lab", [os.getpid()] * 8)
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout
    tables = [
        f'[{host_name(addr)}]\naddress = "{addr}"\nport = {server.port}\nuser = "{user.strip()}"\n'
        for server in servers
        for addr in server.addresses
    ]
    hosts_file = data_dir / "hosts.toml"
    hosts_file.write_text("\n".join(tables))
    add = [*manage, "addhost", "--file", str(hosts_file)]
    subprocess.run(add, env=env, cwd=checkout, check=True, capture_output=True)
    return servers


def answer_once(port: int, deadline: float) -> None:
    """Once the web process answers: a page, the API and /healthz, as a first user would
    (before its first request the web process has not even loaded its URLs and views)."""
    paths = ["/accounts/login/", "/api/", "/healthz"]
    while paths and time.monotonic() < deadline:
        web = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            web.request("GET", paths[0])
            web.getresponse().read()  # any status: the API refuses without a login
            paths.pop(0)
        except OSError:  # not listening yet
            time.sleep(0.5)
        finally:
            web.close()


def kind(pid: int, serve: int) -> str:
    """serve (the supervisor), daphne, or cluster (`manage.py qcluster` and its processes)."""
    name = name_of(pid)
    return "serve" if pid == serve else ("cluster" if name in ("serve", "qcluster") else name)


def measure(checkout: Path, python: str, settle: float, ssh_hosts: int) -> list:
    data_dir, env, servers = seeded_data_dir(checkout, python, ssh_hosts)
    port = free_port()
    serve = subprocess.Popen(
        [python, str(checkout / "manage.py"), "serve", "--port", str(port)],
        env=env,
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + settle
        answer_once(port, deadline)
        time.sleep(max(0.0, deadline - time.monotonic()))
        rows = []
        for pid in descendants(serve.pid):
            values = memory(pid)
            if values and name_of(pid) in ("serve", "daphne", "qcluster"):
                rows.append((pid, kind(pid, serve.pid), values))
        print(f"{checkout}: {hosts_up(python, checkout, env)} hosts up after {settle:g} s")
        return rows
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
        for server in servers:
            stop(server)


def hosts_up(python: str, checkout: Path, env: dict) -> str:
    """ "UP of ALL" from the service's database: the probing loop reached that many."""
    code = (
        "from monitoring.models import Host; "
        "print(Host.objects.filter(status='up').count(), 'of', Host.objects.count())"
    )
    done = subprocess.run(
        [python, str(checkout / "manage.py"), "shell", "-c", code],
        env=env,
        cwd=checkout,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or done.stderr.strip()[-200:]


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


def measure_tensorhive(venv: Path, settle: float) -> list:
    """TensorHive's API server after ``settle`` seconds, as bench/api_side_by_side.py runs it,
    having answered its reservations once."""
    sys.path.insert(0, str(ROOT / "bench" / "tensorhive"))
    import json
    from datetime import UTC, datetime

    import dataset

    home = Path(tempfile.mkdtemp(prefix="hive-bench-memory-th-"))
    port = free_port()
    first = dataset.origin(datetime.now(UTC).replace(tzinfo=None)).isoformat()
    setup = [str(ROOT / "bench" / "tensorhive" / "setup.sh"), str(venv), str(home), str(port)]
    server = subprocess.Popen(
        [*setup, first],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        started = time.monotonic()
        login = json.dumps({"username": dataset.usernames()[0], "password": dataset.PASSWORD})
        token = None
        while token is None and time.monotonic() - started < 600:
            try:
                web = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                headers = {"Content-Type": "application/json"}
                web.request("POST", "/api/user/login", login, headers)
                token = json.loads(web.getresponse().read())["access_token"]
            except (OSError, KeyError, ValueError):
                time.sleep(1)
        if token is None:
            raise RuntimeError(f"TensorHive did not answer on {port} within 600 s")
        web.request("GET", "/api/reservations", headers={"Authorization": f"Bearer {token}"})
        web.getresponse().read()
        time.sleep(max(0.0, started + settle - time.monotonic()))
        return [(pid, "tensorhive", memory(pid)) for pid in descendants(server.pid)]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[ROOT])
    parser.add_argument("--settle", type=float, default=60, help="seconds before reading")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--ssh-hosts", type=int, default=0, help="simulated SSH hosts to add")
    parser.add_argument("--tensorhive-venv", type=Path, help="also TensorHive's API server")
    args = parser.parse_args()
    for _ in range(args.rounds):
        for checkout in args.checkouts:
            rows = measure(checkout.resolve(), args.python, args.settle, args.ssh_hosts)
            report(checkout, rows)
        if args.tensorhive_venv:
            rows = measure_tensorhive(args.tensorhive_venv, args.settle)
            report(Path("TensorHive 1.1.0 API server"), [r for r in rows if r[2]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
