import subprocess

import pytest
from django.test import override_settings

from monitoring.connections import pool
from monitoring.keys import public_key_line
from monitoring.models import Host
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
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout
    return Host.objects.create(
        name=name, address=address, port=sshd.port, username=user.strip(), **fields
    )


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
