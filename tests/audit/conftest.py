"""An sshd that does not trust the service's key, for SSH alarms in the audit log."""

import subprocess

import pytest

from monitoring.connections import pool
from monitoring.models import Host
from tests.realparts import Sshd, require, sshd_available


@pytest.fixture(scope="module")
def untrusting_sshd(tmp_path_factory):
    """A real sshd whose authorized_keys holds some other key than the service's."""
    require(sshd_available(), "OpenSSH server (/usr/sbin/sshd) is not installed")
    workdir = tmp_path_factory.mktemp("untrusting-sshd")
    stranger = workdir / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    server = Sshd(workdir / "sshd", stranger.with_suffix(".pub").read_text(), workdir).start()
    yield server
    server.stop()


@pytest.fixture
def host_behind(untrusting_sshd, db, settings):
    settings.SSH_CONNECT_TIMEOUT = 3
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout
    yield Host.objects.create(
        name="node-7", address="127.0.0.1", port=untrusting_sshd.port, username=user.strip()
    )
    pool.close()
