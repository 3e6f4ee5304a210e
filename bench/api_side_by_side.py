"""Benchmark: our reservations API against TensorHive 1.1.0's, side by side, over real HTTP.

Both services hold the same data (bench/tensorhive/dataset.py: 64 GPUs, 20 users, 5,000
one-GPU bookings) and run as their production processes on loopback:

- ours: the web server we ship (`python -m core.webserver hiveproject.asgi:application`,
  daphne with request bounds, as `manage.py serve` and the gpuhive-web@ unit run it; plain
  daphne for a --baseline checkout from before it), DEBUG off, on SQLite and, with
  --postgres URL, also on PostgreSQL (a database of its own, dropped and made anew); signed
  in by an API token;
- TensorHive: its API server (connexion on gevent's WSGI server, one process) on its SQLite
  database, installed and filled by bench/tensorhive/setup.sh; signed in by its JWT login.

Each round measures every service in turn (the order rotates each round), one client
connection per thread (HTTP/1.1 keep-alive, no compression asked for):

- week: the bookings of 8 GPUs over one week (ours ?device=&start=&end=&page_size=1000, one
  answer as TensorHive's ?resources_ids=&start=&end= is), --week-runs requests from one
  client (p50, p95), then
  8 threads sending --burst requests each (requests/s over the whole burst);
- list: every booking. TensorHive answers all 5,000 in one response; ours is paged (issue
  20), so "list" is reading every page by following the Link header's rel="next", at the
  default page size (100: 50 requests) and at the largest (1,000: 5 requests); times are
  for the whole list. One client (p50, p95), then 8 threads reading 2 whole lists each
  (whole lists per second);
- create: --creates one-GPU bookings from one client, one after another (p50, p95), each in
  a free future hour (the same hours on both sides).

With --pin, every server runs on the first CPU and the clients (this process) on the
others, as a deployment's clients are on other machines: on a small machine the 8 client
threads otherwise take cores from the server, which narrows every ratio of requests/s.

Beside each one-client series, the server process's CPU time (user + system, /proc) per
request: what the service spends, which a loaded machine changes far less than wall times.

The answers are checked first: the week and the whole list hold the same booking titles on
every service. Prints each round's load average (`uptime`'s first figure) and the table:
p50/p95 over all rounds' samples, rates and CPU times the median of the rounds', with
ours/TensorHive ratios (speed-ups: > 1 means ours is faster). --baseline runs another
checkout of ours in the same rounds (before/after a change under the same load).

Run: .venv/bin/python bench/api_side_by_side.py [--rounds 3]
        [--postgres postgres://root@127.0.0.1:5432/hive_side_by_side]
        [--tensorhive-venv /tmp/tensorhive-venv] [--baseline DIR] [--pin]
"""

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
TH_DIR = ROOT / "bench" / "tensorhive"
sys.path.insert(0, str(TH_DIR))

import dataset  # noqa: E402

CLIENTS = 8
WEEK_GPUS = 8
LISTS_PER_CLIENT = 2
NEXT = re.compile(r'<([^>]+)>; rel="next"')


# --- HTTP ------------------------------------------------------------------------------------


class Client:
    """One keep-alive connection to a service; headers sent with every request."""

    def __init__(self, port: int, headers: dict[str, str]):
        self.port, self.headers = port, headers
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def request(self, method: str, path: str, body=None) -> tuple[int, dict, bytes]:
        headers = dict(self.headers)
        if body is not None:
            body = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            try:
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                return response.status, dict(response.getheaders()), response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()  # the server closed an idle connection: once more
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def ok(self, method: str, path: str, body=None, expect=200) -> tuple[dict, bytes]:
        status, headers, content = self.request(method, path, body)
        if status != expect:
            raise RuntimeError(f"{method} {path}: {status} {content[:300]!r}")
        return headers, content


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_up(port: int, process: subprocess.Popen, log: Path, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server on {port} exited:\n{log.read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"nothing listens on {port} after {limit:.0f} s:\n{log.read_text()[-3000:]}")


# The CPUs the servers run on (--pin: the first; otherwise None, wherever the system puts them).
SERVER_CPUS: set[int] | None = None


def start(command: list[str], env: dict, log: Path, cwd: Path = ROOT) -> subprocess.Popen:
    def pin() -> None:  # before exec, so every thread the server starts inherits it
        if SERVER_CPUS:
            os.sched_setaffinity(0, SERVER_CPUS)

    return subprocess.Popen(
        command,
        env=env,
        cwd=cwd,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, ended as one at the end
        preexec_fn=pin,
    )


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# --- the services ----------------------------------------------------------------------------


class Service:
    """What the measurements need from one service: how to ask for the week, the whole
    list and a new booking, and what the answers hold."""

    name: str
    port: int

    def client(self) -> Client:
        return Client(self.port, self.headers)

    def week_path(self, start: datetime, end: datetime) -> str:
        raise NotImplementedError

    def list_paths(self) -> dict[str, str]:
        """The whole list's first request, by the name of its table row."""
        raise NotImplementedError

    def read(self, client: Client, path: str) -> list[dict]:
        """The bookings a list request and the pages after it hold."""
        raise NotImplementedError

    def create(self, client: Client, slot: int) -> None:
        raise NotImplementedError


class Ours(Service):
    """Ours from the checkout at root (this one, or --baseline's)."""

    def __init__(self, name: str, env: dict, work: Path, root: Path = ROOT):
        self.name, self.env, self.work, self.root = name, env, work, root

    def launch(self, first: datetime) -> subprocess.Popen:
        made = subprocess.run(
            [sys.executable, __file__, "--populate-ours", first.isoformat()],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode:
            raise RuntimeError(f"{self.name}: filling the database failed:\n{made.stderr}")
        facts = json.loads(made.stdout.strip().splitlines()[-1])
        self.devices, self.headers = facts["devices"], {"Authorization": f"Bearer {facts['token']}"}
        self.port = free_port()
        self.env["PUBLIC_URL"] = f"http://127.0.0.1:{self.port}"
        shipped = "core.webserver" if (self.root / "core" / "webserver.py").exists() else "daphne"
        server = [sys.executable, "-m", shipped, "-b", "127.0.0.1", "-p", str(self.port)]
        log = self.work / f"{self.name}.log"
        process = start([*server, "hiveproject.asgi:application"], self.env, log, self.root)
        wait_until_up(self.port, process, log, 120)
        return process

    def week_path(self, start, end):
        # One page as large as the API allows holds the whole week, as TensorHive's answer
        # does (the default page, 100, would take 3 requests).
        ids = ",".join(str(i) for i in self.devices[:WEEK_GPUS])
        query = {"device": ids, "start": iso(start), "end": iso(end), "page_size": 1000}
        return "/api/reservations/?" + urlencode(query)

    def list_paths(self):
        return {"list": "/api/reservations/", "list1000": "/api/reservations/?page_size=1000"}

    def read(self, client, path):
        rows = []
        while path:
            headers, content = client.ok("GET", path)
            rows += json.loads(content)
            found = NEXT.search(headers.get("Link", ""))
            path = (
                urlsplit(found.group(1))._replace(scheme="", netloc="").geturl() if found else None
            )
        return rows

    def create(self, client, slot):
        start, position = creation_slot(slot)
        body = {
            "title": f"bench {slot}",
            "devices": [self.devices[position]],
            "start": iso(start),
            "end": iso(start + dataset.HOUR),
        }
        client.ok("POST", "/api/reservations/", body, expect=201)


class TensorHive(Service):
    name = "TensorHive"

    def __init__(self, venv: Path, work: Path):
        self.venv, self.work = venv, work
        self.uuids = [gpu[2] for gpu in dataset.gpus()]

    def launch(self, first: datetime) -> subprocess.Popen:
        self.port = free_port()
        home = self.work / "tensorhive-home"
        log = self.work / "tensorhive.log"
        setup = [str(TH_DIR / "setup.sh"), str(self.venv), str(home), str(self.port)]
        process = start([*setup, first.isoformat()], dict(os.environ), log)
        # The first run installs TensorHive into its virtualenv: minutes.
        wait_until_up(self.port, process, log, 1800)
        login = {"username": dataset.usernames()[0], "password": dataset.PASSWORD}
        _, content = Client(self.port, {}).ok("POST", "/api/user/login", login)
        token = json.loads(content)["access_token"]
        # The token's claims name the user (TensorHive's create asks for the owner's id).
        claims = token.split(".")[1]
        self.user_id = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))[
            "identity"
        ]
        self.headers = {"Authorization": f"Bearer {token}"}
        return process

    def week_path(self, start, end):
        query = [("resources_ids", u) for u in self.uuids[:WEEK_GPUS]]
        query += [("start", th_time(start)), ("end", th_time(end))]
        return "/api/reservations?" + urlencode(query)

    def list_paths(self):
        return {"list": "/api/reservations"}

    def read(self, client, path):
        return json.loads(client.ok("GET", path)[1])

    def create(self, client, slot):
        start, position = creation_slot(slot)
        body = {
            "title": f"bench {slot}",
            "description": "",
            "resourceId": self.uuids[position],
            "userId": self.user_id,
            "start": th_time(start),
            "end": th_time(start + dataset.HOUR),
        }
        client.ok("POST", "/api/reservations", body, expect=201)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def th_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.0Z")  # the only form TensorHive parses


def creation_slot(slot: int) -> tuple[datetime, int]:
    """A free hour for the slot-th new booking: after all the data, one GPU after another."""
    now = datetime.now(UTC).replace(tzinfo=None)
    base = dataset.origin(now) + timedelta(days=30)
    count = dataset.HOSTS * dataset.GPUS_PER_HOST
    return base + dataset.HOUR * (slot // count), slot % count


# --- ours: the database ----------------------------------------------------------------------


def populate_ours(first: datetime) -> None:
    """In a child process with the service's environment: migrate, fill, issue a token;
    prints the GPU ids (dataset order) and the token as one line of JSON."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")
    sys.path.insert(0, os.getcwd())  # the checkout being measured
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.core.management import call_command
    from django.db import connection

    from accesscontrol.models import Grant
    from apitokens.services import issue_token
    from monitoring.models import Device, Host
    from reservations.models import Reservation, ReservedDevice

    call_command("migrate", verbosity=0)
    User = get_user_model()
    User.objects.bulk_create(User(username=name) for name in dataset.usernames())
    by_name = {u.username: u for u in User.objects.filter(username__in=dataset.usernames())}
    users = [by_name[name] for name in dataset.usernames()]
    # Everyone may book every GPU at any time: TensorHive's default group and its
    # "can always use everything" permission (bench/tensorhive/populate.py).
    group = Group.objects.create(name="users")
    group.user_set.add(*users)
    everything = Grant.objects.create(name="can always use everything", valid_from=first.date())
    everything.groups.add(group)
    gpus = dataset.gpus()
    hosts = {
        host.name: host
        for host in Host.objects.bulk_create(
            Host(name=name, address=f"10.0.0.{n + 1}")
            for n, name in enumerate(dict.fromkeys(g[0] for g in gpus))
        )
    }
    Device.objects.bulk_create(Device(host=hosts[h], index=i, uuid=u) for h, i, u in gpus)
    by_uuid = {d.uuid: d for d in Device.objects.all()}
    devices = [by_uuid[u] for _, _, u in gpus]
    rows = dataset.reservations(first)
    made = Reservation.objects.bulk_create(
        Reservation(
            owner=users[user],
            title=title,
            start=start.replace(tzinfo=UTC),
            end=end.replace(tzinfo=UTC),
        )
        for title, _, start, end, user in rows
    )
    ReservedDevice.objects.bulk_create(
        ReservedDevice(reservation=r, device=devices[row[1]], start=r.start, end=r.end)
        for r, row in zip(made, rows, strict=True)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    _, secret = issue_token(users[0], "side-by-side")
    print(json.dumps({"devices": [d.pk for d in devices], "token": secret}))


def our_environment(work: Path, database_url: str | None) -> dict:
    env = dict(os.environ)
    env.update(
        HIVE_DATA_DIR=str(work),
        DJANGO_SETTINGS_MODULE="hiveproject.settings",
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
        LOG_LEVEL="WARNING",
    )
    for name in ("REDIS_URL", "DATABASE_URL", "HIVE_BEHIND_PROXY"):
        env.pop(name, None)
    if database_url:
        env["DATABASE_URL"] = database_url
        fresh_postgres_database(database_url)
    work.mkdir(parents=True)
    return env


def fresh_postgres_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        raise SystemExit(f"--postgres: name the database in lower case letters, not {name!r}")
    maintenance = urlsplit(url)._replace(path="/postgres").geturl()
    psql = ["psql", maintenance, "-qc"]
    subprocess.run([*psql, f"DROP DATABASE IF EXISTS {name}"], check=True)
    subprocess.run([*psql, f"CREATE DATABASE {name}"], check=True)


# --- measuring -------------------------------------------------------------------------------


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return 1000 * (time.perf_counter() - started)


def burst(service: Service, work_per_client: int, action) -> float:
    """CLIENTS threads, each on its own connection, each doing action(client) work_per_client
    times; the completed actions per second of the whole burst."""
    clients = [service.client() for _ in range(CLIENTS)]
    for client in clients:
        action(client)  # connect and warm, outside the timing
    failures = []

    def run(client):
        try:
            for _ in range(work_per_client):
                action(client)
        except Exception as exc:  # noqa: BLE001  (reported after the burst)
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{service.name}: {failures[0]}")
    return CLIENTS * work_per_client / elapsed


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc: Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_client(service: Service, what: str, actions, got: dict) -> None:
    """Each action in turn from one client: its milliseconds, and the server's CPU
    milliseconds per action (what the service spends, whatever else loads the machine)."""
    before = cpu_seconds(service.pid)
    got[what] = [timed(action) for action in actions]
    got[what + " cpu"] = 1000 * (cpu_seconds(service.pid) - before) / len(actions)


def measure(service: Service, args, week: str, slots) -> dict[str, list[float] | float]:
    client = service.client()
    got = {}
    one_client(service, "week", [lambda: service.read(client, week)] * args.week_runs, got)
    got["week/s"] = burst(service, args.burst, lambda c: service.read(c, week))
    for what, path in service.list_paths().items():

        def read(c, path=path):
            return service.read(c, path)

        one_client(service, what, [lambda: read(client)] * args.list_runs, got)
        got[what + "/s"] = burst(service, LISTS_PER_CLIENT, read)
    creates = [lambda s=s: service.create(client, s) for s in slots]
    one_client(service, "create", creates, got)
    return got


def check_same_data(services: list[Service], week: dict[str, str]) -> tuple[int, int]:
    """Every service's week and whole list hold the same bookings (by title)."""
    answers = {}
    for service in services:
        client = service.client()
        answers[service.name] = (
            sorted(r["title"] for r in service.read(client, week[service.name])),
            sorted(r["title"] for r in service.read(client, service.list_paths()["list"])),
        )
    first = next(iter(answers.values()))
    for answer in answers.values():
        if answer != first:
            counts = {n: (len(w), len(a)) for n, (w, a) in answers.items()}
            raise RuntimeError(f"the services answer other bookings (week, list): {counts}")
    return len(first[0]), len(first[1])


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


# (label, our key, TensorHive's key, kind): ours in pages of 1,000 is compared with
# TensorHive's one answer, as the default pages are.
ROWS = [
    ("week of 8 GPUs, 1 client: p50 / p95 ms", "week", "week", "latency"),
    ("week of 8 GPUs, 8 clients: requests/s", "week/s", "week/s", "rate"),
    ("whole list, 1 client: p50 / p95 ms", "list", "list", "latency"),
    ("whole list, 8 clients: lists/s", "list/s", "list/s", "rate"),
    ("whole list in pages of 1,000, 1 client: p50 / p95 ms", "list1000", "list", "latency"),
    ("whole list in pages of 1,000, 8 clients: lists/s", "list1000/s", "list/s", "rate"),
    ("create, 1 client: p50 / p95 ms", "create", "create", "latency"),
    ("server CPU ms per week request", "week cpu", "week cpu", "cpu"),
    ("server CPU ms per whole list", "list cpu", "list cpu", "cpu"),
    ("server CPU ms per whole list in pages of 1,000", "list1000 cpu", "list cpu", "cpu"),
    ("server CPU ms per create", "create cpu", "create cpu", "cpu"),
]


def summary(rounds: list[dict], key: str, kind: str) -> tuple[float, str]:
    """p50 (and p95) over all rounds' samples, or the median of the rounds' rates or CPU
    times."""
    if kind in ("rate", "cpu"):
        rate = statistics.median(r[key] for r in rounds)
        return rate, f"{rate:.2f}" if rate < 10 else f"{rate:,.1f}"
    values = [v for r in rounds for v in r[key]]
    p50 = percentile(values, 0.5)
    return p50, f"{p50:,.0f} / {percentile(values, 0.95):,.0f}"


def report(services: list[Service], results: dict, loads: list[str]) -> None:
    theirs, ours = services[-1], services[:-1]
    print("\nload average (1 min) at each round's start and end: " + "; ".join(loads))
    head = ["what", *[s.name for s in services], *[f"{o.name} / {theirs.name}" for o in ours]]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for label, key, their_key, kind in ROWS:
        base, their_cell = summary(results[theirs.name], their_key, kind)
        figures = [summary(results[o.name], key, kind) for o in ours]
        cells = [cell for _, cell in figures]
        if key != their_key:
            their_cell = "(as above)"
        ratios = [f"{(mine / base if kind == 'rate' else base / mine):.2f}×" for mine, _ in figures]
        print("| " + " | ".join([label, *cells, their_cell, *ratios]) + " |")


def pin_servers_apart() -> None:
    """Servers on the first CPU, this process (the clients) on the others."""
    global SERVER_CPUS
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs two CPUs or more")
    SERVER_CPUS = {cpus[0]}
    os.sched_setaffinity(0, set(cpus[1:]))
    print(f"servers on CPU {cpus[0]}, clients on {cpus[1:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--week-runs", type=int, default=30)
    parser.add_argument("--burst", type=int, default=10, help="week requests per client")
    parser.add_argument("--list-runs", type=int, default=3)
    parser.add_argument("--creates", type=int, default=10)
    parser.add_argument("--postgres", help="also ours on this PostgreSQL database (made anew)")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also ours (SQLite) from this other checkout, e.g. `git archive main` unpacked: "
        "before and after a change, under the same load",
    )
    parser.add_argument("--tensorhive-venv", type=Path, default=Path("/tmp/tensorhive-venv"))  # noqa: S108
    parser.add_argument("--pin", action="store_true", help="servers on CPU 0, clients elsewhere")
    parser.add_argument("--populate-ours", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.populate_ours:
        return populate_ours(datetime.fromisoformat(args.populate_ours))
    if args.pin:
        pin_servers_apart()

    work = Path(tempfile.mkdtemp(prefix="hive-side-by-side-"))
    now = datetime.now(UTC).replace(tzinfo=None)
    first = dataset.origin(now)
    services: list = [Ours("ours SQLite", our_environment(work / "sqlite", None), work)]
    if args.postgres:
        services.append(Ours("ours PostgreSQL", our_environment(work / "pg", args.postgres), work))
    if args.baseline:
        env = our_environment(work / "baseline", None)
        services.append(Ours("baseline SQLite", env, work, args.baseline.resolve()))
    services.append(TensorHive(args.tensorhive_venv, work))
    # The week: this week's Monday 00:30 UTC to the next one. Bookings start and end on the
    # hour, so none touches an edge (TensorHive counts touching bookings, we do not).
    monday = now.replace(hour=0, minute=30, second=0, microsecond=0) - timedelta(now.weekday())
    with ExitStack() as running:
        for service in services:
            process = service.launch(first)
            running.callback(stop, process)
            service.pid = process.pid  # daphne, or TensorHive's server (setup.sh execs it)
        week = {s.name: s.week_path(monday, monday + timedelta(days=7)) for s in services}
        in_week, in_list = check_same_data(services, week)
        print(
            f"{dataset.RESERVATIONS} bookings on {len(dataset.gpus())} GPUs on every service; "
            f"the week of {WEEK_GPUS} GPUs holds {in_week}, the whole list {in_list}; "
            f"{args.rounds} interleaved rounds; work dir {work}"
        )
        results = {s.name: [] for s in services}
        loads, slot = [], 0
        for round_number in range(args.rounds):
            load = os.getloadavg()[0]
            turn = round_number % len(services)
            order = services[turn:] + services[:turn]
            for service in order:
                slots = range(slot, slot + args.creates)
                results[service.name].append(measure(service, args, week[service.name], slots))
                print(f"round {round_number + 1}: {service.name} done", flush=True)
            slot += args.creates
            loads.append(f"{load:.1f}–{os.getloadavg()[0]:.1f}")
    report(services, results, loads)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
