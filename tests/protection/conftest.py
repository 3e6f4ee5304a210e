"""Fixtures for protection: a host whose latest probe the test writes, and a reservation.

The end-to-end tests use monitoring's real sshd, fake GPUs and real processes.
"""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.conf import Conf

from accesscontrol.services import ensure_default_group
from monitoring.models import Device, Host
from reservations.services import create_reservation
from tests.accounts import mapped_to_own_name
from tests.monitoring.conftest import (  # noqa: F401  (the real parts, shared)
    _fresh_connections,
    fake_gpu_root,
    gpus,
    make_host,
    real_processes,
    ssh_host,
    sshd,
)

HANDLERS_NONE: list = []


# The personas, each mapped to the UNIX account named like them: the tests speak of
# processes of "owner" and "other" as ps would print them.
@pytest.fixture
def owner(owner):
    return mapped_to_own_name(owner)


@pytest.fixture
def other_user(other_user):
    return mapped_to_own_name(other_user)


@pytest.fixture
def admin_user(admin_user):
    return mapped_to_own_name(admin_user)


@pytest.fixture
def tasks_run_inline(monkeypatch):
    """Run django-q2 tasks in the caller (the real task code, without a cluster)."""
    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def no_handlers(settings):
    settings.VIOLATION_HANDLERS = HANDLERS_NONE


@pytest.fixture
def node(db):
    """A host with two GPUs, probed (by the test) through ``Probe``."""
    host = Host.objects.create(name="node-1", address="10.0.0.1", status=Host.Status.UP)
    for i in range(2):
        Device.objects.create(host=host, index=i, uuid=f"GPU-{i}", name="Tesla T4")
    return host


class Probe:
    """Writes what the latest probe of a host saw, as the monitoring loop stores it."""

    def __init__(self, host: Host):
        self.host = host
        self.at = timezone.now()

    def saw(self, *processes, reachable=True) -> "Probe":
        """processes: (gpu index, pid, user, command) tuples, and optionally the container
        (monitoring.containers' {"id", "name", "runtime"}) as a fifth item."""
        self.at += timedelta(seconds=2)
        self.host.status = Host.Status.UP if reachable else Host.Status.UNREACHABLE
        self.host.last_probe_at = self.at
        self.host.last_snapshot = {
            "host": self.host.name,
            "reachable": reachable,
            "error": None if reachable else "cannot connect",
            "gpus": [],
            "processes": [
                {
                    "gpu_uuid": f"GPU-{gpu}",
                    "pid": pid,
                    "user": user,
                    "command": command,
                    "container": container[0] if container else None,
                }
                for gpu, pid, user, command, *container in processes
            ],
            "cpu": {},
        }
        self.host.save()
        return self


@pytest.fixture
def probe(node):
    return Probe(node)


@pytest.fixture
def booking(node, owner, other_user):
    """owner has GPU 0 of node-1 reserved from half a minute ago for two hours."""
    ensure_default_group()
    start = timezone.now() - timedelta(seconds=30)
    return create_reservation(
        owner,
        title="training run",
        devices=[node.devices.get(index=0)],
        start=start,
        end=start + timedelta(hours=2),
    )
