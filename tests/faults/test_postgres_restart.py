"""PostgreSQL restarts under load: a server of the test's own, stopped and started for real.

The shared server must not be restarted, so this test runs its own cluster (initdb, pg_ctl
from the PostgreSQL server package), points a real daphne at it, loads it with users who
read the dashboard and the API and book and cancel GPUs, and restarts the server in the
middle. Answers during the outage must be plain errors, daphne must keep answering, and
it must serve again without being restarted; afterwards no confirmed booking is missing
and no GPU is booked twice (bench/load's own setup and invariant check, on that server).
"""

import contextlib
import glob
import http.client
import json
import os
import pwd
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from tests.realparts import free_port, require
from tests.security.conftest import ROOT, Daphne, service_env

CLIENTS = 8
WARM_UP_S, OUTAGE_S, RECOVERY_BOUND_S, SERVE_AFTER_S = 4.0, 2.0, 15.0, 4.0
REQUEST_TIMEOUT_S = 30
DB_PASSWORD = "pw-db-secret"
LEAKS = ("Traceback", "OperationalError", "psycopg", "PoolTimeout", "connection to server")


def server_binaries() -> Path | None:
    """The newest PostgreSQL server's bin directory (Debian's layout), if installed."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


class OwnPostgres:
    """A PostgreSQL cluster in a temporary directory, on 127.0.0.1 at a free port."""

    def __init__(self, bindir: Path):
        self.bin, self.port = bindir, free_port()
        self.root = Path(tempfile.mkdtemp(prefix="hive-pg-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        if os.geteuid() == 0:  # initdb refuses to run as root: the cluster is postgres's
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)

    def url(self, db: str = "hive") -> str:
        # Trust authentication: the password is never asked for, only carried (and not shown).
        return f"postgres://hive:{DB_PASSWORD}@127.0.0.1:{self.port}/{db}"

    def _run(self, tool: str, *args: str, timeout: float = 60) -> None:
        argv = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(
            argv, cwd=self.root, capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} {args} failed: {done.stdout}{done.stderr}\n{log}")

    def init(self) -> "OwnPostgres":
        self._run("initdb", "-D", str(self.data), "-U", "hive", "-A", "trust", "-E", "UTF8")
        self.start()
        with psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=10) as c:
            c.execute("CREATE DATABASE hive")
        return self

    def start(self) -> None:
        options = f"-k {self.root} -p {self.port} -c listen_addresses=127.0.0.1"
        log, data = str(self.log), str(self.data)
        self._run("pg_ctl", "start", "-D", data, "-l", log, "-w", "-t", "30", "-o", options)

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w", "-t", "30")

    def remove(self) -> None:
        """Stop (immediately) whatever runs and delete the cluster."""
        pidfile = self.data / "postmaster.pid"
        if pidfile.exists():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.stop("immediate")
        if pidfile.exists():  # pg_ctl could not stop it: end the postmaster we started
            with contextlib.suppress(ValueError, ProcessLookupError, OSError):
                os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
                time.sleep(1)
        shutil.rmtree(self.root, ignore_errors=True)


def has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture
def own_postgres():
    bindir = server_binaries()
    require(bindir is not None, "the PostgreSQL server (/usr/lib/postgresql/*/bin) is missing")
    if os.geteuid() == 0:
        require(shutil.which("runuser") is not None, "runuser (util-linux) is not installed")
        require(has_user("postgres"), "there is no postgres user to run the server as")
    server = OwnPostgres(bindir)
    try:
        yield server.init()
    finally:
        server.remove()


@dataclass
class Answer:
    started: float
    ended: float
    what: str  # "GET /", "GET /api/devices/", "POST" (a booking), "DELETE" (a cancel)
    status: int | None  # None: no HTTP answer at all (refused, reset, timed out)
    body: str


class LabMember(threading.Thread):
    """One signed-in user reading pages and booking and cancelling GPUs until told to stop."""

    def __init__(self, port, account, devices, answers, journal, stop):
        super().__init__(daemon=True)
        self.port, self.devices, self.stop = port, devices, stop
        self.answers, self.journal, self.mine = answers, journal, []
        self.headers = {
            "Host": "localhost",
            "Cookie": f"sessionid={account['session']}; csrftoken={account['csrf']}",
            "X-CSRFToken": account["csrf"],
        }
        self.random = random.Random(account["user"])

    def request(self, what, method, path, body=None) -> Answer:
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(body)
        started = time.monotonic()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT_S)
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                status, text = response.status, response.read().decode(errors="replace")
            finally:
                conn.close()
        except OSError as exc:  # refused, reset, timed out: daphne did not answer
            status, text = None, repr(exc)
        answer = Answer(started, time.monotonic(), what, status, text)
        self.answers.append(answer)
        return answer

    def book(self):
        base = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        start = base + timedelta(minutes=30 * self.random.randrange(96))
        body = {
            "title": "restart",
            "devices": self.random.sample(self.devices, self.random.choice((1, 1, 2))),
            "start": start.isoformat(),
            "end": (start + timedelta(hours=1)).isoformat(),
        }
        answer = self.request("POST", "POST", "/api/reservations/", body)
        if answer.status == 201:
            pk = json.loads(answer.body)["id"]
            self.journal.append({"booked": pk, **body})
            self.mine.append(pk)
        elif answer.status == 400 and "already reserved" in answer.body:
            self.journal.append({"refused": body})

    def cancel(self):
        pk = self.mine.pop(self.random.randrange(len(self.mine)))
        self.journal.append({"cancelling": pk})  # no 204: either outcome is right
        if self.request("DELETE", "DELETE", f"/api/reservations/{pk}/").status == 204:
            self.journal.append({"cancelled": pk})

    def run(self):
        while not self.stop.is_set():
            choice = self.random.random()
            if choice < 0.25:
                self.request("GET /api/devices/", "GET", "/api/devices/")
            elif choice < 0.5:
                self.request("GET /", "GET", "/")
            elif choice < 0.8 or not self.mine:
                self.book()
            else:
                self.cancel()
            time.sleep(0.05)


def manage(env, *args, script=None, timeout=300):
    argv = [sys.executable, str(ROOT / (script or "manage.py")), *args]
    return subprocess.run(
        argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def ok(answer: Answer) -> bool:
    return answer.status is not None and (
        200 <= answer.status < 300 or (answer.status == 400 and "already reserved" in answer.body)
    )


def test_postgres_restarts_under_load_requests_fail_cleanly_then_recover(own_postgres, tmp_path):
    pg = own_postgres
    env = service_env(
        tmp_path / "data",
        DATABASE_URL=pg.url(),
        DATABASE_POOL_TIMEOUT="2",  # requests wait this long for a connection, then fail
        SECRET_KEY=secrets.token_urlsafe(50),
        LOG_LEVEL="WARNING",
    )
    done = manage(env, "migrate", "-v0")
    assert done.returncode == 0, done.stdout + done.stderr
    # bench/load's own setup: hosts with stored probes, a grant for everyone, open sessions.
    sessions = tmp_path / "sessions.json"
    done = manage(env, str(sessions), str(CLIENTS), script="bench/load/setup_load.py")
    assert done.returncode == 0, done.stdout + done.stderr
    state = json.loads(sessions.read_text())

    server = Daphne(env, collect_static=False)
    answers: list[Answer] = []
    journal: list[dict] = []
    stop = threading.Event()
    members = [
        LabMember(server.port, account, state["devices"], answers, journal, stop)
        for account in state["users"]
    ]
    try:
        t0 = time.monotonic()
        for member in members:
            member.start()
        time.sleep(WARM_UP_S)
        down_at = time.monotonic()
        pg.stop("fast")  # a real restart: sessions ended, the port closed
        time.sleep(OUTAGE_S)
        pg.start()
        up_at = time.monotonic()
        # Run on until answers have been good for a while, within the bound.
        recovered_at = None
        while time.monotonic() < up_at + RECOVERY_BOUND_S:
            good = [a for a in list(answers) if a.started >= up_at and ok(a)]
            recovered_at = min((a.ended for a in good), default=None)
            if recovered_at is not None and time.monotonic() > recovered_at + SERVE_AFTER_S:
                break
            time.sleep(0.2)
        stop.set()
        for member in members:
            member.join(timeout=REQUEST_TIMEOUT_S + 10)
        assert not any(m.is_alive() for m in members), "a client is stuck on an answer"
        assert server.proc.poll() is None, "daphne exited"
        # Served again by the same daphne, one request after another.
        final = LabMember(server.port, state["users"][0], state["devices"], answers, journal, stop)
        checks = [final.request("GET /api/devices/", "GET", "/api/devices/") for _ in range(3)]
        checks.append(final.request("GET /", "GET", "/"))
        final.book()
        checks.append(answers[-1])
    finally:
        stop.set()
        server.stop()

    (tmp_path / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in journal))
    failed = [a for a in answers if not ok(a)]
    before = [a for a in failed if a.ended < down_at]
    recovered = recovered_at if recovered_at is not None else float("inf")
    during = [a for a in failed if a.ended >= down_at and a.started < recovered]
    after = [a for a in failed if a.started >= recovered]
    by_status: dict = {}
    for a in failed:
        by_status[a.status] = by_status.get(a.status, 0) + 1
    print(
        f"\n{len(answers)} answers: {len(answers) - len(failed)} ok, {len(failed)} failed"
        f" {by_status}; during the outage {len(during)}, before {len(before)}, after {len(after)}"
        f"; server down {up_at - down_at:.1f} s from {down_at - t0:.1f} s"
        f"; recovery {'none' if recovered_at is None else f'{recovered_at - up_at:.2f} s'}"
        f" after the server was up again; daphne logged"
        f" {server.log.read_text().count('Internal Server Error')} internal server errors"
    )
    for a in failed[:3] + after[:3]:
        print(
            f"  {a.what} at {a.started - t0:.1f}-{a.ended - t0:.1f} s: {a.status} {a.body[:150]!r}"
        )

    assert not [a for a in failed if a.status is None], "daphne itself did not answer"
    assert not before, "requests failed before the restart"
    assert all(a.status >= 500 for a in failed), "a failure was not a server error"
    for a in failed:
        assert not any(leak in a.body for leak in (*LEAKS, DB_PASSWORD, env["SECRET_KEY"])), a.body
        assert str(pg.port) not in a.body, a.body
    assert during, "the outage went unnoticed: was the server stopped?"
    assert recovered_at is not None and recovered_at - up_at < RECOVERY_BOUND_S
    assert not after, "requests failed again after the service had recovered"
    assert all(ok(a) for a in checks), [(a.what, a.status, a.body[:200]) for a in checks]

    # The restarted database holds every confirmed booking, and no GPU twice at once.
    done = manage(env, str(tmp_path / "journal.jsonl"), script="bench/load/check_invariants.py")
    print(done.stdout.strip())
    assert done.returncode == 0, done.stdout + done.stderr
    assert sum("booked" in e for e in journal) > 0
