"""An SSH host dies while the loop is probing it, then comes back."""

import time
from pathlib import Path

import pytest

from core.models import Activity
from monitoring.connections import pool
from monitoring.loop import LOOP_ACTIVITY
from monitoring.models import Host
from tests.monitoring.conftest import make_host
from tests.monitoring.test_ssh_probe import UUID0, gpu_row

pytestmark = pytest.mark.django_db(transaction=True)


def cycles_until(loop, host, done, seconds=30):
    """Run real cycles until `done(host)` holds; the hosts recorded in each cycle."""
    recorded, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        recorded.append(loop.cycle())
        host.refresh_from_db()
        if done(host):
            return recorded
        time.sleep(max(0.0, loop.interval - (time.monotonic() - started)))
    raise AssertionError(f"{host.name} still {host.status} after {seconds}s: {host.last_error}")


def established(port: int) -> int:
    """Open TCP connections from this machine to the sshd's port (both directions listed)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, remote, state = line.split()[1:4]
            if state == "01" and int(remote.split(":")[1], 16) == port:
                count += 1
    return count


def probing(loop, host) -> bool:
    """A probe of host is under way: a one-shot probe's thread, or a question its probe
    session has not answered yet."""
    session = loop.sessions.by_host.get(host.pk)
    return host.pk in loop.in_flight or (session is not None and session.asked_at is not None)


def test_a_host_that_dies_mid_probe_is_marked_down_then_up_again(loop, mortal_sshd, gpus):
    node = gpus("127.0.0.2")
    node.set_gpus([gpu_row(0, UUID0)])
    host = make_host(mortal_sshd, "node-2", "127.0.0.2")
    cycles_until(loop, host, lambda h: h.status == Host.Status.UP)

    node.set_mode("hang")  # the next probe stays on the host: we kill it under the probe
    loop.cycle()
    assert probing(loop, host)
    mortal_sshd.stop()
    cycles_until(loop, host, lambda h: h.status == Host.Status.UNREACHABLE)
    assert established(mortal_sshd.port) == 0

    node.set_mode("normal")
    mortal_sshd.start()
    recorded = cycles_until(loop, host, lambda h: h.status == Host.Status.UP)
    assert host.last_error == "" and host.devices.get().uuid == UUID0
    # Back on one connection: nothing left hanging from before the crash, no probe stuck.
    assert established(mortal_sshd.port) == 1
    assert list(pool._entries) == [host.pk] and not loop.in_flight
    assert len(recorded) < 30
    # The host's trouble is the host's, not the loop's: the loop itself never failed.
    activity = Activity.objects.get(name=LOOP_ACTIVITY)
    assert activity.last_error == "" and "1 hosts recorded" in activity.last_summary
