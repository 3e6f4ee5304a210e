"""Faults injected into real parts: an sshd of our own to kill, the loop run cycle by cycle."""

import pytest
from django.db import connection
from django.test import override_settings

from monitoring.keys import public_key_line
from monitoring.loop import ProbeLoop
from tests.monitoring.conftest import _fresh_connections, fake_gpu_root, gpus  # noqa: F401
from tests.realparts import Sshd, require, sshd_available


@pytest.fixture
def mortal_sshd(tmp_path, hive_data_dir, fake_gpu_root):  # noqa: F811
    """A real sshd this test may kill and restart (the shared one serves other tests)."""
    require(sshd_available(), "OpenSSH server (/usr/sbin/sshd) is not installed")
    with override_settings(SSH_KEY_PATH=hive_data_dir / "ssh" / "id_ed25519"):
        key = public_key_line()
    server = Sshd(tmp_path / "sshd", key, fake_gpu_root).start()
    yield server
    server.stop()


@pytest.fixture
def fast(settings):
    settings.MONITORING_INTERVAL = 0.3
    settings.MONITORING_LEASE_SECONDS = 2.0
    settings.SSH_CONNECT_TIMEOUT = 2
    settings.SSH_MAX_BACKOFF = 1
    settings.NVIDIA_SMI_TIMEOUT = 4


@pytest.fixture
def loop(fast):
    loop = ProbeLoop(holder="faults")
    yield loop
    loop.executor.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def postgresql_only():
    """First in a test's arguments, so that nothing else is started before it skips."""
    if connection.vendor != "postgresql":
        pytest.skip("the fault needs PostgreSQL (CI's second run has it)")
