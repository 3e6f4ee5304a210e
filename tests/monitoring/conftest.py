import subprocess

import pytest
from django.test import override_settings

from accesscontrol.models import RunAsAllowance
from monitoring.connections import pool
from monitoring.keys import public_key_line
from monitoring.models import Device, Host
from tests.realparts import FakeGpus, Sshd, require, sshd_available


@pytest.fixture(scope="session")
def fake_gpu_root(tmp_path_factory):
    return tmp_path_factory.mktemp("fake-gpus")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory, hive_data_dir, fake_gpu_root):
    """A real OpenSSH server on 127.0.0.1-3 that trusts the service key."""
    require(sshd_available(), "OpenSSH server (/usr/sbin/sshd) is not installed")
    with override_settings(SSH_KEY_PATH=hive_data_dir / "ssh" / "id_ed25519"):
        key = public_key_line()
    server = Sshd(tmp_path_factory.mktemp("sshd"), key, fake_gpu_root).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh_connections():
    """Each test starts without connections left open by an earlier one."""
    pool.close()
    yield
    pool.close()


@pytest.fixture
def ssh_host(db, sshd, settings):
    """Host registered at 127.0.0.2 behind the test sshd (as the current UNIX user)."""
    settings.SSH_CONNECT_TIMEOUT = 3
    return make_host(sshd, "node-2", "127.0.0.2")


def make_host(sshd, name, address, **fields):
    """A host behind the test sshd. Its one account (the current user) is the monitoring
    account, the service's own and maybe root, all refused for jobs: as an admin would, the
    host records an explicit allowance to run the tests' jobs as it (tests of the refusal
    delete it)."""
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout
    host = Host.objects.create(
        name=name, address=address, port=sshd.port, username=user.strip(), **fields
    )
    RunAsAllowance.objects.create(
        unix_username=user.strip(), host=host, reason="the test sshd has only this account"
    )
    return host


@pytest.fixture
def gpus(fake_gpu_root):
    """Fake GPUs per address: gpus("127.0.0.2").set_gpus([...])."""
    return lambda address: FakeGpus(fake_gpu_root, address)


@pytest.fixture
def real_processes():
    """Start real processes (optionally as another user); all are killed afterwards."""
    started = []

    def start(argv, user=None):
        proc = subprocess.Popen(argv, user=user)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


# The latest probe of a healthy host, as stored in Host.last_snapshot.
SNAPSHOT = {
    "host": "node-1",
    "reachable": True,
    "error": None,
    "gpus": [
        {
            "index": 0,
            "uuid": "GPU-1",
            "name": "Tesla T4",
            "memory_total_mib": 15360,
            "memory_used_mib": 512,
            "utilization_gpu": 7,
            "utilization_memory": 1,
            "temperature_c": 40,
            "power_w": None,
        }
    ],
    "processes": [
        {"gpu_uuid": "GPU-1", "pid": 42, "user": None, "command": "python x.py", "memory_mib": 500}
    ],
    "cpu": {"utilization": 3.5, "memory_total_mib": 1000, "memory_used_mib": 100},
}


@pytest.fixture
def node(db):
    host = Host.objects.create(
        name="node-1",
        address="10.0.0.1",
        status=Host.Status.UP,
        last_snapshot=SNAPSHOT,
        host_key="AAAAsecret",
        host_key_type="ssh-ed25519",
        host_key_fingerprint="SHA256:x",
    )
    Device.objects.create(host=host, index=0, uuid="GPU-1", name="Tesla T4")
    Host.objects.create(
        name="node-2",
        address="10.0.0.2",
        status=Host.Status.UNREACHABLE,
        last_error="cannot connect to 10.0.0.2:22: timed out",
    )
    return host
