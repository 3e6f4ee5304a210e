"""A real `manage.py workers` (or `serve`) on the test database, its processes found in /proc."""

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from django.conf import settings

from monitoring.supervisor import group_members
from tests.realparts import FakeGpus, children
from tests.security.conftest import service_env

ROOT = Path(__file__).resolve().parents[2]
FAKE_BIN = ROOT / "tests" / "fake_bin"
GPU_ROW = "0, GPU-sup0, 81559, 1024, 12, 3, 30, 70.5, NVIDIA H100 80GB HBM3"


def fake_local_gpus(root: Path) -> FakeGpus:
    gpus = FakeGpus(root, "local")
    gpus.set_gpus([GPU_ROW])
    return gpus


def answers(url: str) -> bool:
    """The page at ``url`` answers 200 (the web process is up)."""
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def service(data_dir: Path, gpu_root: Path, **env) -> dict:
    """A service process's environment: the fake nvidia-smi for `localhost`, fast settings."""
    return service_env(
        data_dir,
        # django-q2 signs tasks with it: the test process queues some for these workers.
        SECRET_KEY=settings.SECRET_KEY,
        PATH=f"{FAKE_BIN}:{os.environ['PATH']}",
        FAKE_GPU_DIR=str(gpu_root),
        **env,
    )


class Service:
    """`manage.py ARGS` in a session of its own, its output in a file."""

    def __init__(self, args: list[str], env: dict, log: Path):
        self.log = log
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def tree(self) -> set[int]:
        """Every live process of its session (serve, daphne, the cluster and its workers)."""
        return set(session_members(self.proc.pid))

    def cluster_pid(self) -> int | None:
        return cluster_of(self.proc.pid)[0]

    def state_dir(self) -> tuple[int, Path] | tuple[None, None]:
        return cluster_of(self.proc.pid)

    def workers(self) -> list[int]:
        return cluster_workers(self.proc.pid)

    def busy(self) -> set[int]:
        _, state = self.state_dir()
        return {int(p.name.split("-")[1]) for p in state.glob("busy-*")} if state else set()

    def signal(self, signum: int) -> float:
        """Send a signal to the service; seconds until it returned."""
        started = time.monotonic()
        self.proc.send_signal(signum)
        self.proc.wait(timeout=60)
        return time.monotonic() - started

    def kill_all(self) -> None:
        """Teardown: a stop as systemd does it (SIGTERM, so the supervisor cleans up), then
        SIGKILL to whatever of the session is left."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.tree():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def cluster_of(supervisor: int) -> tuple[int, Path] | tuple[None, None]:
    """The cluster a supervisor (`serve`, `workers`) forked, and the directory its workers
    note their tasks in. The cluster is the supervisor's child that leads a group of its own
    (as daphne, under serve, does too); the directory is named after the supervisor, and
    only the running cluster's exists."""
    alive = set(session_members(supervisor))  # zombies left out
    leaders = [
        p
        for p in children(supervisor)
        if p in alive and pgid(p) == p and not is_daphne(p) and not is_sender(p)
    ]
    pid = leaders[0] if leaders else None
    found = sorted(Path(tempfile.gettempdir()).glob(f"hive-workers-{supervisor}-*"))
    return (pid, found[0]) if pid and len(found) == 1 else (None, None)


def cluster_workers(supervisor: int) -> list[int]:
    """The worker processes of a supervisor's cluster: those that noted themselves."""
    pid, state = cluster_of(supervisor)
    if pid is None:
        return []
    noted = {int(p.name.split("-")[1]) for p in state.glob("done-*")}
    return sorted(set(group_members(pid)) & noted)


def is_daphne(pid: int) -> bool:
    """daphne, or the bounded daphne `serve` runs (`python -m core.webserver`)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"daphne" in command or b"core.webserver" in command


def is_sender(pid: int) -> bool:
    """The notifications sender (notifications.sender), the supervisor's other child."""
    try:
        return b"notifications sender" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:  # a short-lived process (ps, nvidia-smi) ended meanwhile
        return None


def session_members(sid: int) -> list[int]:
    """Live processes (zombies aside) whose session is ``sid``."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def wchan(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return ""


def until(predicate, seconds: float, what: str, service: Service, step: float = 0.2):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        assert service.proc.poll() is None, f"the service exited\n{service.tail()}"
        time.sleep(step)
    raise AssertionError(f"not within {seconds:.0f}s: {what}\n{service.tail()}")
