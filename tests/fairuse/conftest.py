"""Fixtures for fair use: the real sshd and fake GPUs of monitoring, tasks run inline."""

import pytest

from tests.monitoring.conftest import (  # noqa: F401  (the real parts, shared)
    _fresh_connections,
    fake_gpu_root,
    gpus,
    make_host,
    real_processes,
    ssh_host,
    sshd,
)
from tests.protection.conftest import node, tasks_run_inline  # noqa: F401


def gpu_row(index: int, uuid: str, utilization: int = 0) -> str:
    """One line of the fake nvidia-smi's --query-gpu output, with the load asked for."""
    return f"{index}, {uuid}, 40960, 1000, {utilization}, 0, 41, 61.52, NVIDIA A100-SXM4-40GB"


@pytest.fixture
def release_at_once(settings):
    """The site rule 'release', with no waiting: warned at the first idle probe, released
    at the next (the minutes are whole numbers; the tests' clocks are the probes)."""
    settings.FAIRUSE_IDLE_ACTION = "release"
    settings.FAIRUSE_IDLE_MINUTES = 0
    settings.FAIRUSE_IDLE_GRACE_MINUTES = 0
    settings.VIOLATION_HANDLERS = []
