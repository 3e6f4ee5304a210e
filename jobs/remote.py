"""What jobs run on hosts, as the task owner's UNIX account, over monitoring's connections.

Every script here is fixed text, in jobs/scripts/ (see monitoring.hostscripts); values (names,
paths, the user's command) are passed as positional arguments of ``sh -c SCRIPT sh ARG...``
inside an argv list, so no value is ever parsed as shell code by the service.

Files of a task, in the log directory on the host (``JOBS_LOG_DIR``, ``~/`` = the account's
home): ``NAME.log`` (stdout and stderr), ``NAME.pid`` (the screen window's shell, which leads
the task's process group), ``NAME.exit`` (``CODE``, written when the command ends: the file's
modification time is the end; files of earlier versions hold ``CODE ISO-TIME``).
"""

import base64
import copy
import os
import re
import secrets
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from monitoring import hostscripts, localaccounts
from monitoring.connections import ConnectionPool
from monitoring.models import Host
from monitoring.transport import CommandResult, TransportError

# The scripts this module runs on hosts, in jobs/scripts/ (each file says how it is called).
SPAWN = hostscripts.load("jobs", "spawn.sh")
WINDOW = hostscripts.load("jobs", "window.sh")
SIGNAL = hostscripts.load("jobs", "signal.sh")
SYNC = hostscripts.load("jobs", "sync.sh")
WAIT_EXIT = hostscripts.load("jobs", "wait-exit.sh")
STARTED = hostscripts.load("jobs", "started.sh")
READ_LOGS = hostscripts.load("jobs", "read-logs.sh")
UID_FLOOR = hostscripts.load("jobs", "uid-floor.sh")
LAUNCHER = hostscripts.load("jobs", "launcher.sh")
THEN_STATUS = re.compile(r"\n?--then-status (\d+)\n?$")

FREE_PORT = (
    "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1]); s.close()"
)

# A line of `screen -ls` naming a live session: one whose screen process was killed stays
# listed, as "(Dead ???)", until someone wipes it, and runs nothing.
SESSION_LINE = re.compile(r"^\s+(\d+)\.(\S+)\s(?!.*\(Dead \?\?\?\))")


class RemoteError(Exception):
    """A command on a host failed; ``str()`` is one line for the user."""


# One ConnectionPool per UNIX account: the pool keys connections by host and reconnects
# when the login changes, so accounts sharing a pool would evict each other every call.
_pools: dict[str, ConnectionPool] = {}
_pools_lock = threading.Lock()


def _pool(username: str) -> ConnectionPool:
    with _pools_lock:
        # Accounts not used for a while lose their connections, and the pool goes too.
        for name, pool in list(_pools.items()):
            pool.close_idle()
            if name != username and not len(pool):
                del _pools[name]
        return _pools.setdefault(username, ConnectionPool())


def close_all() -> None:
    """Drop every job connection (as a restarted service would have none)."""
    with _pools_lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()


def run_as(
    host: Host, username: str, argv: list[str], timeout=None, min_uid: int | None = None
) -> CommandResult:
    """Run argv on host as ``username``: logged in with the service key over SSH, or on the
    service's own machine switched to that account (see monitoring.localaccounts); through
    this thread's launcher there, if it has one (``launchers``). ``min_uid``: run it only if
    the account's UID is at least that (checked on the host, where the UID is known)."""
    launcher = _launcher(host, username)
    if launcher is not None and launcher.can_pass([str(min_uid or 0), *argv]):
        try:
            return launcher.run(argv, timeout or settings.SSH_COMMAND_TIMEOUT, min_uid or 0)
        except BrokenPipeError:  # it had ended unseen, before taking this: run it as below
            launcher.close(kill=True)
    if min_uid is not None:
        argv = ["sh", "-c", UID_FLOOR, "sh", str(min_uid), *argv]
    as_user = copy.copy(host)
    as_user.username = username
    try:
        if host.is_local:
            if why := localaccounts.problem(host.name, username):
                raise RemoteError(why)
            argv = localaccounts.as_account(username, argv)
        return _pool(username).run(as_user, argv, timeout=timeout)
    except TransportError as exc:
        raise RemoteError(f"{host.name}: {exc}") from None


# --- a launcher: one shell kept open per account, for many short calls ------------------------

# A shell kept open as one account on the service's own machine (jobs/scripts/launcher.sh).
# The scripts this module sends are given to it once; an item SCRIPT_MARK + N stands for the
# Nth.
SCRIPT_MARK = "\x01"


def _launcher_scripts() -> tuple[str, ...]:
    """The scripts a launcher is given once (their index is what a request names)."""
    return (SPAWN, WINDOW, WAIT_EXIT, SYNC, SIGNAL, STARTED, READ_LOGS)


class Launcher:
    """LAUNCHER, run as ``username`` on the service's own machine (local transport)."""

    def __init__(self, host: Host, username: str):
        self.host_name, self.username = host.name, username
        self.token = secrets.token_hex(16)
        self.done = re.compile(rb"\n--done-- " + self.token.encode() + rb" (\d+)\n")
        scripts = _launcher_scripts()
        self.named = {text: f"{SCRIPT_MARK}{i}" for i, text in enumerate(scripts)}
        argv = ["sh", "-c", LAUNCHER, "sh", self.token, SCRIPT_MARK, *scripts]
        argv = localaccounts.as_account(username, argv)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # not stopped by the terminal's Ctrl-C before gpurun is
        )
        for stream in (self.proc.stdout, self.proc.stderr):
            os.set_blocking(stream.fileno(), False)

    def can_pass(self, items: list[str]) -> bool:
        """Whether a request of these items can be written (an item a line, none taken for
        a script's name). The scripts it was given pass by their names, line breaks and all."""
        return not any(
            "\n" in item or "\0" in item or item.startswith(SCRIPT_MARK)
            for item in items
            if item not in self.named
        )

    def run(self, argv: list[str], timeout: float, min_uid: int = 0) -> CommandResult:
        """As run_as; BrokenPipeError if the shell had ended (nothing was run)."""
        items = [str(min_uid), *(self.named.get(item, item) for item in argv)]
        request = "".join(f"{line}\n" for line in [str(len(items)), *items])
        self._drain()  # anything written after the last answer is not this one's
        self.proc.stdin.write(request.encode(errors="surrogateescape"))
        self.proc.stdin.flush()
        try:
            out, err, status = self._answer(time.monotonic() + timeout)
        except TimeoutError:
            self.close(kill=True)
            raise RemoteError(
                f"{self.host_name}: {argv[0]} did not finish within {timeout:g}s"
            ) from None
        except OSError as exc:  # it ended while running the request
            self.close(kill=True)
            raise RemoteError(f"{self.host_name}: {argv[0]}: the shell stopped ({exc})") from None
        if status == 127:  # as the transport says it
            raise RemoteError(f"{self.host_name}: command not found: {argv[0]}")
        return CommandResult(argv, status, out, err)

    def _answer(self, deadline: float) -> tuple[str, str, int]:
        out, err = bytearray(), bytearray()
        streams = {self.proc.stdout.fileno(): out, self.proc.stderr.fileno(): err}
        with selectors.DefaultSelector() as selector:
            for fd in streams:
                selector.register(fd, selectors.EVENT_READ)
            while (end := self.done.search(out)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        raise OSError("its output ended")
                    streams[key.fd] += chunk
        with suppress(BlockingIOError):  # what it wrote on stderr before the end line
            err += os.read(self.proc.stderr.fileno(), 65536)
        text = out[: end.start()].decode(errors="replace")
        return text, err.decode(errors="replace"), int(end[1])

    def _drain(self) -> None:
        for stream in (self.proc.stdout, self.proc.stderr):
            with suppress(BlockingIOError):
                while os.read(stream.fileno(), 65536):
                    pass

    def close(self, kill: bool = False) -> None:
        """End the shell: it stops at the end of its input; ``kill``: with what it runs."""
        if kill and self.proc.poll() is None:  # (once reaped, its id may be another's)
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


_thread = threading.local()  # .host: the host id; .launchers: account -> its Launcher


@contextmanager
def launchers(host: Host):
    """Within this, calls of this thread as any account on ``host`` go through one Launcher
    per account, if ``host`` is the service's own machine (elsewhere nothing changes). For
    callers that make many short calls in a row (gpurun's worker per GPU)."""
    if not host.is_local:
        yield
        return
    _thread.host, _thread.launchers = host.pk, {}
    try:
        yield
    finally:
        for launcher in _thread.launchers.values():
            launcher.close()
        del _thread.host, _thread.launchers


def _launcher(host: Host, username: str) -> Launcher | None:
    """This thread's launcher for ``username`` on ``host``, started at its first call."""
    if getattr(_thread, "host", None) != host.pk or localaccounts.problem(host.name, username):
        return None
    launcher = _thread.launchers.get(username)
    if launcher is None or launcher.proc.poll() is not None:
        try:
            launcher = _thread.launchers[username] = Launcher(host, username)
        except OSError:  # it could not start: calls go the usual way, which says why
            return None
    return launcher


def _checked(result: CommandResult, what: str) -> str:
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise RemoteError(
            f"{what} failed: {detail[-1] if detail else f'exit {result.exit_status}'}"
        )
    return result.stdout


def log_dir() -> str:
    return settings.JOBS_LOG_DIR


def spawn_argv(name: str, command: str, env: dict[str, str]) -> list[str]:
    """The exact argv sent to the host to start a task."""
    assignments = [f"{k}={v}" for k, v in env.items()]
    return ["sh", "-c", SPAWN, WINDOW, log_dir(), name, command, *assignments]


@dataclass
class Spawned:
    pid: int | None
    log_path: str


def spawn(host: Host, username: str, argv: list[str], min_uid: int) -> Spawned:
    """Start ``argv`` (from spawn_argv) as ``username`` if its UID is at least ``min_uid``."""
    started = run_as(host, username, argv, min_uid=min_uid)
    out = _checked(started, "starting the screen session").strip()
    pid, _, path = out.partition(" ")
    return Spawned(int(pid) if pid.isdigit() else None, path)


def started(host: Host, username: str, name: str) -> tuple[int | None, str]:
    """(pid of the task's window, or None if it never started; its log path)."""
    argv = ["sh", "-c", STARTED, "sh", log_dir(), name]
    out = _checked(run_as(host, username, argv), "looking for the task's window").strip("\n")
    pid, _, path = out.partition(" ")
    return (int(pid) if pid.isdigit() else None), path


def send_signal(host: Host, username: str, signal_name: str, pids: list[int]) -> None:
    argv = ["sh", "-c", SIGNAL, "sh", signal_name, *map(str, pids)]
    _checked(run_as(host, username, argv), f"sending SIG{signal_name}")


@dataclass
class SessionState:
    alive: bool
    exit_code: int | None = None
    ended_at: datetime | None = None


def session_states(host: Host, username: str, names: list[str]) -> dict[str, SessionState]:
    """Whether each named session still runs, and its exit code if it ended."""
    out = _checked(run_as(host, username, ["sh", "-c", SYNC, "sh", log_dir(), *names]), "sync")
    sessions_part, _, exits_part = out.partition("--exit files--")
    alive = {m[2] for m in map(SESSION_LINE.match, sessions_part.splitlines()) if m}
    states = {name: SessionState(name in alive) for name in names}
    for line in exits_part.splitlines():
        name, *fields = line.split() or [""]
        if name in states:
            states[name] = _exit_state(fields, alive=name in alive) or states[name]
    return states


def _exit_state(fields: list[str], alive: bool) -> SessionState | None:
    """The state an exit file's "CODE [TIME]" gives; None if it holds no exit code."""
    if not fields or not re.fullmatch(r"-?\d+", fields[0]):
        return None
    ended = _parse_time(fields[1]) if len(fields) > 1 else None
    return SessionState(alive, int(fields[0]), ended)


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def wait_for_exit(
    host: Host, username: str, name: str, seconds: float, then: Sequence[str] = ()
) -> tuple[SessionState | None, str | None]:
    """(the task's end as its exit file tells it, the output of ``then`` run right after);
    (None, None) after about ``seconds`` without the file (the session may still have died:
    a sync tells). The output is None too when ``then`` failed."""
    steps = str(max(1, round(seconds * 20)))  # of the 50 ms polling, for tasks without a FIFO
    argv = ["sh", "-c", WAIT_EXIT, "sh", log_dir(), name, f"{seconds:g}", steps, *then]
    out = _checked(run_as(host, username, argv, timeout=seconds + 30), "waiting for the task")
    exit_line, _, then_part = out.partition("--then--\n")
    status = THEN_STATUS.search(then_part)
    then_out = then_part[: status.start()] + "\n" if status and status[1] == "0" else None
    return _exit_state(exit_line.split(), alive=True), then_out


def free_port(host: Host, username: str) -> int:
    """A TCP port free on the host now (the kernel's pick for bind(0))."""
    out = _checked(run_as(host, username, ["python3", "-c", FREE_PORT]), "finding a free port")
    return int(out.strip())


@dataclass
class LogPiece:
    size: int  # of the log file now
    start: int  # where data begins in it
    data: bytes


def read_logs(
    host: Host, username: str, wanted: list[tuple[str, int]], keep: int, limit: int
) -> list[LogPiece | None]:
    """For each (log path, offset): the log's new bytes, or None where there is no file."""
    pairs = [str(value) for path, offset in wanted for value in (path, max(offset, 0))]
    argv = ["sh", "-c", READ_LOGS, "sh", str(keep), str(limit), *pairs]
    out = _checked(run_as(host, username, argv), "reading the logs")
    pieces = []
    for part in out.split("@@ ")[1:]:
        head, _, body = part.partition("\n")
        if head.strip() == "-":
            pieces.append(None)
            continue
        size, start = map(int, head.split())
        pieces.append(LogPiece(size, start, base64.b64decode("".join(body.split()))))
    if len(pieces) != len(wanted):
        raise RemoteError(f"reading the logs failed: {len(pieces)} answers for {len(wanted)} logs")
    return pieces
