"""Jobs run for real: through the test sshd, in real GNU screen sessions, as this UNIX user."""

import getpass
import re
import shutil
import subprocess
import time
import uuid

import pytest
from django.conf import settings

from accesscontrol.services import ensure_default_group, profile_for
from jobs import remote
from monitoring.models import Device
from tests.monitoring.conftest import fake_gpu_root, make_host, sshd  # noqa: F401
from tests.realparts import require
from tests.workers import discard_queued


@pytest.fixture(autouse=True)
def _empty_broker():
    """Tasks queued by earlier tests (Redis keeps them) are not these tests' workers' work.
    (The ORM broker's queue is rolled back with each test; asking for the database here would
    put tests that must not have it, like the first run's, inside a transaction.)"""
    if settings.REDIS_URL:
        discard_queued()


@pytest.fixture(autouse=True)
def _fresh_job_connections(settings):
    # Task ids repeat from test to test (SQLite rolls its sequences back): a prefix of its
    # own keeps each test's screen sessions apart from those of the test before.
    prefix = settings.JOBS_SESSION_PREFIX = f"hivetest{uuid.uuid4().hex[:8]}"
    remote.close_all()
    yield
    remote.close_all()
    end_task_sessions(prefix)


def task_sessions(prefix: str = "hivetest[0-9a-f]+") -> list[str]:
    out = subprocess.run(["screen", "-ls"], capture_output=True, text=True).stdout
    return [m[1] for m in re.finditer(rf"^\s+(\d+\.{prefix}-\d+)\s", out, re.MULTILINE)]


def end_task_sessions(prefix: str) -> None:
    """Quit the screen sessions this test left running (only its own: test runs in other
    processes on the same machine have sessions of their own)."""
    if shutil.which("screen") is None:
        return
    for session in task_sessions(prefix):
        pid = int(session.split(".")[0])
        subprocess.run(["pkill", "-KILL", "-s", str(pid)], check=False)  # its whole session
        subprocess.run(["screen", "-S", session, "-X", "quit"], capture_output=True, check=False)
    subprocess.run(["screen", "-wipe"], capture_output=True, check=False)
    wait_for(lambda: not task_sessions(prefix), timeout=10)


@pytest.fixture
def log_dir(tmp_path, settings):
    """Task files go here (the same machine as the sshd, so tests can read them)."""
    settings.JOBS_LOG_DIR = str(tmp_path / "logs")
    return tmp_path / "logs"


@pytest.fixture
def runner(owner):
    """The owner, mapped to the UNIX account the test sshd lets in (the current user)."""
    profile = profile_for(owner)
    profile.unix_username = getpass.getuser()
    profile.save()
    ensure_default_group()  # everyone may use every GPU
    return owner


@pytest.fixture
def node(db, sshd, settings, log_dir):  # noqa: F811
    require(shutil.which("screen") is not None, "GNU screen is not installed")
    settings.SSH_CONNECT_TIMEOUT = 3
    host = make_host(sshd, "node-2", "127.0.0.2")
    for i in range(2):
        Device.objects.create(host=host, index=i, uuid=f"GPU-{i}-uuid", name="Tesla T4")
    return host


def wait_for(predicate, timeout=20.0, step=0.2):
    """Poll until predicate() is truthy; returns its last value (tests assert on it)."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(step)
        value = predicate()
    return value
