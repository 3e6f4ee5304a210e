"""What jobs run on hosts, as the task owner's UNIX account, over monitoring's connections.

Every script here is fixed text; values (names, paths, the user's command) are passed as
positional arguments of ``sh -c SCRIPT sh ARG...`` inside an argv list, so no value is ever
parsed as shell code by the service.

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

from monitoring import localaccounts
from monitoring.connections import ConnectionPool
from monitoring.models import Host
from monitoring.transport import CommandResult, TransportError

# "~/x" means the account's home on the host; resolved there, never by the service.
_RESOLVE_DIR = 'dir=$1; case $dir in "~/"*) dir=$HOME/${dir#"~/"};; esac; '

# The screen window's shell. It traps INT and TERM with a no-op (children still get the
# default actions), so it outlives the command and writes its exit code even when the
# command is interrupted. The command runs in a shell that, on those signals, exits only
# once its foreground program has (with that program's status): a program that ignores
# SIGTERM keeps the task running until it is killed, instead of looking ended. A `tail -f`
# shows the log to whoever attaches with `screen -x`; being an asynchronous command of a
# non-interactive shell it ignores SIGINT. The window's processes are its process group (the
# shell leads it; SIGNAL stops a task by it), and none outlives the window:
# - when the command ends, the shell, once the exit file and the FIFO line are out, sends
#   SIGHUP to its group (itself excepted): the tail, and whatever the command left running
#   in the background, end as at the close of a terminal. The kernel would do so too when
#   the shell, the session's leader, exits, but only to the terminal's foreground group of
#   that moment, which a command may have changed;
# - when the terminal goes away first (`screen -X quit`, screen killed) or someone sends
#   SIGHUP to the shell, the shell ends at once, as a login shell would (a trapped signal
#   would wait for the foreground command: a `sleep 300` would keep the window for 5
#   minutes), with no exit code (a sync reports the session ended without one), and the
#   kernel sends SIGHUP to the group of the hung-up terminal.
# Neither shell traps SIGHUP: a process the command forks inherits its shell's traps until
# it resets them, so a SIGHUP sent just then (a command that ends right after starting
# something in the background) would be lost.
# So the window closes with its command, with no process of its own after the end (a
# lingering `sleep` would run just as the next start begins); the log stays in its file and
# on the page. Once the exit file is in place, a line into the task's FIFO, if a waiter made
# one (opened read-write, so it never blocks), wakes whoever waits there (WAIT_EXIT). Between
# the command's end and that line only shell built-ins run (the exit file is written by
# printf, its time is its mtime): a process started there would delay every next start of
# gpurun and the queue by its fork and exec, a few ms on a loaded host. The file is a few
# bytes in one write; a reader who comes between its creation and that write finds it empty
# and takes it as not there yet.
WINDOW = (
    'log=$1 exitf=$2 pidf=$3 cmd=$4 donef=$5; trap : INT TERM; echo $$ > "$pidf"; '
    'tail -n +1 -f "$log" 2>/dev/null & '
    'sh -c \'trap exit INT TERM; eval "$1"\' sh "$cmd" >> "$log" 2>&1; code=$?; '
    'printf "%s\\n" "$code" > "$exitf"; if [ -p "$donef" ]; then echo 1<>"$donef"; fi; '
    'trap "" HUP; kill -s HUP 0; exit $code'
)

# Start the window detached, wait (up to about 5 s, in 1 ms steps: the pid comes within a
# few, and short commands queued by gpurun pay this wait on every start) for its pid, print
# "PID LOGPATH". A second session of the same name is refused; screen is asked only when an
# earlier window of that name may still run (its pid file names a live process): asking it
# costs more than the rest of the start (it probes every session of the account), and a
# name is started again only when an interrupted start is retried (and only then are files
# of an earlier window there to remove: `rm` runs only for those). The environment is
# exported by a subshell that then becomes screen (one exec fewer than `env`; `export` alone
# would list the environment, hence the test); the names were checked when the task was made
# (jobs.templating.check_env), and a bad one ends the subshell, a special built-in's error.
# The FIFO a waiter sleeps on is made by its first wait (WAIT_EXIT), while the command runs:
# `mkfifo` here cost every start a process before the command could begin, and a task
# nobody waits for needs none.
SPAWN = _RESOLVE_DIR + (
    'name=$2 cmd=$3; shift 3; [ -d "$dir" ] || mkdir -p "$dir" || exit 3; '
    'old=; read -r old 2>/dev/null < "$dir/$name.pid"; '
    'if [ -n "$old" ] && kill -0 "$old" 2>/dev/null && '
    'screen -ls 2>/dev/null | grep -q "[.]$name[[:space:]]"; then '
    'echo "a screen session named $name is already running" >&2; exit 4; fi; '
    'for f in "$dir/$name.exit" "$dir/$name.pid" "$dir/$name.done"; do '
    'if [ -e "$f" ] || [ -h "$f" ]; then rm -f "$f"; fi; done; '
    ': > "$dir/$name.log" || exit 3; '
    '([ $# -eq 0 ] || export "$@"; exec screen -dmS "$name" sh -c "$0" sh '
    '"$dir/$name.log" "$dir/$name.exit" "$dir/$name.pid" "$cmd" "$dir/$name.done") || exit 5; '
    'i=0; while [ ! -s "$dir/$name.pid" ] && [ $i -lt 5000 ]; do sleep 0.001; i=$((i+1)); done; '
    'pid=; read -r pid 2>/dev/null < "$dir/$name.pid"; printf "%s %s\\n" "$pid" "$dir/$name.log"'
)

# Signal every process of the task's group except the window's shell itself (so it stays
# to write the exit code, even after SIGKILL).
SIGNAL = (
    'sig=$1; shift; for pgid; do for p in $(pgrep -g "$pgid"); do '
    '[ "$p" = "$pgid" ] || kill -s "$sig" "$p" 2>/dev/null; done; done; true'
)

# The time an exit file was written (UTC, ISO 8601); GNU's and BusyBox's date both read it.
_MTIME = '$(date -u -r "$exitf" +%Y-%m-%dT%H:%M:%SZ)'

# One call per account per host per sync: the account's screen sessions, then each given
# task's exit file as "NAME CODE TIME" (an earlier version's file, "CODE TIME", gives
# "NAME CODE TIME MTIME": its own time is read first).
SYNC = _RESOLVE_DIR + (
    "shift; screen -ls 2>/dev/null; echo '--exit files--'; for name; do "
    'exitf="$dir/$name.exit"; if [ -f "$exitf" ]; then ended=; read -r ended < "$exitf"; '
    f'printf "%s %s %s\\n" "$name" "$ended" "{_MTIME}"; '
    "fi; done; true"
)

# Wait (up to $3 seconds) for a task's exit file and print it: "CODE" when it came during the
# wait (the waiter knows the time: now), else "CODE TIME" as SYNC tells it. A waiter that
# wants to know the moment a task ends asks once, instead of polling the whole sync. It
# holds the task's FIFO open read-write before looking for the file, so the window's line
# (written after the file) is never missed, and it sleeps in the shell's own `read` without
# polling, so no process stands between the window's line and the answer; a timer in the
# background writes a line of its own after $3 seconds (killed when the end came first, and
# its `sleep` with it: it waits for the sleep with `wait`, which a trapped signal interrupts,
# so no sleep outlives the call; a line written with no reader left is lost). The first wait
# makes the FIFO; the window, which writes the file before it looks for the FIFO, either
# finds it or wrote the file before it was made, which the waiter then sees in its second
# look. Tasks whose FIFO could not be made are polled every 50 ms. Once the file is there, the
# optional command after the fourth argument runs too (what the waiter needs next, without
# another round trip), its output and status after a marker line.
WAIT_EXIT = _RESOLVE_DIR + (
    'secs=$3 steps=$4 exitf="$dir/$2.exit" donef="$dir/$2.done" before=; '
    'if [ -f "$exitf" ]; then before=1; '
    'elif [ -p "$donef" ] || mkfifo "$donef" 2>/dev/null; then exec 3<>"$donef"; '
    'if [ ! -f "$exitf" ]; then '
    '(trap \'kill $! 2>/dev/null; exit\' TERM; sleep "$secs" & wait $!; echo 1<>"$donef") '
    ">/dev/null 2>&1 3<&- & timer=$!; "
    "read -r line <&3; kill $timer 2>/dev/null; fi; exec 3<&-; "
    'else i=0; while [ ! -f "$exitf" ] && [ $i -lt "$steps" ]; do sleep 0.05; i=$((i+1)); '
    'done; fi; [ -f "$exitf" ] || exit 0; IFS= read -r ended < "$exitf"; '
    f'if [ -n "$before" ]; then ended="$ended {_MTIME}"; fi; '
    'printf "%s\\n" "$ended"; shift 4; [ $# -gt 0 ] || exit 0; '
    'echo "--then--"; "$@"; echo "--then-status $?"'
)
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


# The refusal of an account whose UID is below the floor ($floor; $uid is its UID).
_BELOW_FLOOR = 'echo "refused: $(id -un) has UID $uid, below $floor (a system account)" >&2'

# Run argv only if the account's UID is at least $1: a system account (postgres, www-data)
# mapped by mistake is refused on the host itself, where its UID is known.
UID_FLOOR = (
    f'floor=$1; shift; uid=$(id -u); if [ "$uid" -lt "$floor" ]; then {_BELOW_FLOOR}; exit 6; '
    'fi; exec "$@"'
)


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

# A shell kept open as one account on the service's own machine that runs what run_as would,
# one request at a time: a call then costs the fork and exec of its own command, instead of
# setpriv, a shell in the account's home and a UID check each. A request is a line with the
# number of lines that follow, then the UID floor and the argv, an item a line. The answer
# is the command's output, a line break and "--done-- TOKEN STATUS"; its errors go to the
# shell's stderr. The token ($1) is unguessable, so no output is taken for the end.
# The scripts this module sends (SPAWN, WAIT_EXIT, ...) are given to the shell once, as its
# arguments after the token and SCRIPT_MARK; an item SCRIPT_MARK + N stands for the Nth. A
# shell's `read` takes its input a byte at a time (it must not read past the line), so a
# start sending its 2 KB of scripts on every call cost about 2,500 system calls before it
# could begin.
SCRIPT_MARK = "\x01"
LAUNCHER = (
    'token=$1 mark=$2; shift 2; i=0; for s; do eval "s$i=\\$s"; i=$((i+1)); done; '
    "uid=$(id -u); while IFS= read -r n; do set --; "
    'while [ $# -lt "$n" ]; do IFS= read -r item || exit 0; case $item in "$mark"*) '
    'k=${item#"$mark"}; case $k in ""|*[!0-9]*) ;; *) eval "item=\\$s$k";; esac;; esac; '
    'set -- "$@" "$item"; done; '
    f'floor=$1; shift; if [ "$uid" -lt "$floor" ]; then {_BELOW_FLOOR}; status=6; '
    'else "$@" < /dev/null; status=$?; fi; '
    'printf "\\n--done-- %s %s\\n" "$token" "$status"; done'
)


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

    @staticmethod
    def can_pass(items: list[str]) -> bool:
        """Whether a request of these items can be written (an item a line, none taken for
        a script's name)."""
        return not any(
            "\n" in item or "\0" in item or item.startswith(SCRIPT_MARK) for item in items
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


# A task's pid and log path after its starter died: "PID LOGPATH" as SPAWN prints them, with
# no PID if the window never started (SPAWN removes an old pid file before starting it).
STARTED = _RESOLVE_DIR + (
    'name=$2; printf "%s %s\\n" "$(cat "$dir/$name.pid" 2>/dev/null)" "$dir/$name.log"'
)


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


# The new part of each given log: for each pair FILE OFFSET, a line "@@ SIZE START" (or
# "@@ -" without the file), then base64 of at most LIMIT bytes from START: START is the
# offset, 0 if the file is now shorter (rewritten), or SIZE - KEEP when more than KEEP bytes
# are new (the service keeps only that much). base64 keeps the bytes exact and the markers
# apart from the text.
READ_LOGS = (
    "keep=$1 limit=$2; shift 2; while [ $# -ge 2 ]; do f=$1 start=$2; shift 2; "
    'if [ ! -f "$f" ]; then echo "@@ -"; continue; fi; size=$(($(wc -c < "$f"))); '
    '[ "$start" -gt "$size" ] && start=0; [ $((size - start)) -gt "$keep" ] && '
    'start=$((size - keep)); echo "@@ $size $start"; '
    'tail -c +$((start + 1)) "$f" | head -c "$limit" | base64; done; true'
)


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
