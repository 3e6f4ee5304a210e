"""The `hive` client against a live test server: a small lab, users, and a config per test."""

import threading

import pytest
from click.testing import CliRunner
from django.core.cache import cache
from django.db import connection
from hive_cli import config
from hive_cli.main import cli

from accesscontrol.services import ensure_default_group
from apitokens.services import issue_token
from jobs.tasks import sync_running
from monitoring.models import Device, Host
from tests.accounts import mapped_to_own_name

# The real sshd, GNU screen and a node behind them, for the job commands (tests/jobs's own).
from tests.jobs.conftest import fake_gpu_root, log_dir, node, runner, sshd  # noqa: F401
from tests.workers import run_queued


def gpu(index, used, util):
    return {
        "index": index,
        "uuid": f"GPU-{index}",
        "name": "Tesla T4",
        "memory_total_mib": 15360,
        "memory_used_mib": used,
        "utilization_gpu": util,
        "utilization_memory": 1,
        "temperature_c": 40 + index,
        "power_w": None,
    }


# node-1's last probe: GPU 0 runs alice's training, GPUs 1 and 2 are idle.
SNAPSHOT = {
    "host": "node-1",
    "reachable": True,
    "error": None,
    "gpus": [gpu(0, 9000, 97), gpu(1, 0, 0), gpu(2, 0, 0)],
    "processes": [
        {"gpu_uuid": "GPU-0", "pid": 4242, "user": "alice", "command": "python train.py",
         "memory_mib": 8800},
    ],
    "cpu": {"utilization": 3.5, "memory_total_mib": 1000, "memory_used_mib": 100},
}  # fmt: skip


@pytest.fixture
def owner(owner):
    return mapped_to_own_name(owner)


@pytest.fixture
def other_user(other_user):
    return mapped_to_own_name(other_user)


@pytest.fixture(autouse=True)
def _fresh_throttles():
    cache.clear()


@pytest.fixture(autouse=True)
def hive_config(tmp_path, monkeypatch):
    """Each test has its own config file and no HIVE_* variables from outside."""
    path = tmp_path / "config" / "gpuhive" / "config.toml"
    monkeypatch.setenv("HIVE_CONFIG", str(path))
    for name in ("HIVE_URL", "HIVE_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.fixture
def lab(transactional_db):
    node1 = Host.objects.create(
        name="node-1", address="10.0.0.1", status=Host.Status.UP, last_snapshot=SNAPSHOT
    )
    node2 = Host.objects.create(
        name="node-2", address="10.0.0.2", status=Host.Status.UNREACHABLE, last_error="timed out"
    )
    gpus = [
        Device.objects.create(host=node1, index=i, uuid=f"GPU-{i}", name="Tesla T4",
                              memory_total_mib=15360)
        for i in range(3)
    ]  # fmt: skip
    gpus.append(Device.objects.create(host=node2, index=0, uuid="GPU-X", name="A100"))
    return gpus


@pytest.fixture
def bookable(lab, owner, other_user, admin_user):
    ensure_default_group()
    return lab


@pytest.fixture
def hive(live_server):
    """hive(*args, input=None, color=False) -> click Result, run in this process."""

    def run(*args, input=None, color=False):
        return CliRunner().invoke(cli, list(args), input=input, color=color)

    return run


@pytest.fixture
def signed_in(live_server):
    """signed_in(user): the config file holds a fresh token of that user."""

    def sign(user):
        secret = issue_token(user, f"cli test {user}")[1]
        config.save(config.Config(url=live_server.url, token=secret, username=user.username))
        return secret

    return sign


@pytest.fixture
def gpu_node(node, runner):  # noqa: F811  (fixtures imported above)
    """The test sshd's node-2, up, with its two GPUs idle in its latest probe."""
    gpus = [{**gpu(i, 0, 0), "uuid": f"GPU-{i}-uuid"} for i in range(2)]
    node.status = node.Status.UP
    node.last_snapshot = {**SNAPSHOT, "host": "node-2", "gpus": gpus, "processes": []}
    node.save()
    return node


@pytest.fixture
def workers():
    """What the workers do: the actions asked of them, and after each monitoring cycle,
    ask the hosts which tasks ended and fetch the logs."""
    done = threading.Event()

    def loop():
        try:
            while not done.wait(0.3):
                run_queued()
                sync_running()
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    done.set()
    thread.join(timeout=30)
