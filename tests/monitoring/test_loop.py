"""The leased probing loop against a real sshd: leasing, takeover, dead hosts, the signal."""

import socket
import threading
import time
from datetime import timedelta
from itertools import pairwise

import pytest
from django.core import checks
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.models import Schedule

from core import lease
from core.models import Activity
from monitoring.loop import LOOP_ACTIVITY, ProbeLoop, ensure_schedules, run_probe_loop
from monitoring.models import GpuMetric, Host, HostMetric
from monitoring.signals import cycle_finished
from tests.monitoring.conftest import make_host
from tests.monitoring.test_ssh_probe import UUID0, UUID1, gpu_row

pytestmark = pytest.mark.django_db(transaction=True)


class RecordingLoop(ProbeLoop):
    """A real loop that notes when each of its cycles ran."""

    def __init__(self, name, log):
        super().__init__(holder=name)
        self.log = log

    def cycle(self):
        started = time.monotonic()
        host_ids = super().cycle()
        self.log.append((self.holder, started, time.monotonic()))
        return host_ids


class StillClock:
    """The leases' clock (core.lease.clock), standing still until a test moves it on:
    a lease expires when the test says, however slowly a busy machine runs the loops."""

    def __init__(self):
        self.now = timezone.now()

    def __call__(self):
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def lease_clock(monkeypatch):
    clock = StillClock()
    monkeypatch.setattr(lease, "clock", clock)
    return clock


def wait_until(predicate, timeout=60.0):
    """Poll until predicate() is true (False after ``timeout`` seconds: a hung loop)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def fast(settings):
    settings.MONITORING_INTERVAL = 0.3
    settings.MONITORING_LEASE_SECONDS = 1.0
    settings.SSH_CONNECT_TIMEOUT = 3


@pytest.fixture
def node(sshd, gpus, fast):
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0), gpu_row(1, UUID1)])
    return make_host(sshd, "node-2", "127.0.0.2")


def settle(loop):
    """Run cycles until one records a probe (a first SSH login outlasts a short interval)."""
    for _ in range(20):
        if loop.cycle():
            return
    raise AssertionError("no probe finished in 20 cycles")


def run_in_thread(loop, run_for, outcome):
    def target():
        try:
            outcome[loop.holder] = loop.run(run_for)
        finally:
            from django.db import connection

            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def test_two_loops_never_probe_concurrently(node, lease_clock):
    log, outcome = [], {}
    first = RecordingLoop("a", log)
    thread = run_in_thread(first, 60.0, outcome)
    try:
        assert wait_until(lambda: len(log) >= 2)  # a holds the lease and probes
        second = run_in_thread(RecordingLoop("b", log), 2.0, outcome)
        second.join()
        assert wait_until(lambda: len(log) >= 4)  # and goes on probing
    finally:
        first.stop()
        thread.join()
    assert outcome["b"].startswith("another loop (a) holds the lease")
    assert {holder for holder, _, _ in log} == {"a"}


def test_the_successor_takes_over_when_the_lease_is_released(node):
    log, outcome = [], {}
    run_in_thread(RecordingLoop("a", log), 1.0, outcome).join()
    run_in_thread(RecordingLoop("b", log), 1.0, outcome).join()
    assert [h for h, _, _ in log[:1]] == ["a"] and log[-1][0] == "b"
    spans = sorted((start, end) for _, start, end in log)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in pairwise(spans))


def test_a_crashed_loops_lease_expires_and_another_takes_over(node, lease_clock):
    # A loop that took the lease and died leaves exactly this row behind.
    assert lease.acquire(LOOP_ACTIVITY, "crashed-worker", seconds=30)
    log = []
    refused = RecordingLoop("b", log).run(0.5)
    assert "crashed-worker" in refused and log == []
    lease_clock.advance(29)
    assert "crashed-worker" in RecordingLoop("b", log).run(0.5)
    lease_clock.advance(1)  # the lease ends at its expiry
    assert RecordingLoop("c", log).run(0.5).endswith("cycles")
    assert log and {h for h, _, _ in log} == {"c"}
    assert Activity.objects.get(name=LOOP_ACTIVITY).holder == ""  # released on the way out


def test_a_loop_that_lost_its_lease_stops_probing(node, lease_clock):
    loop = RecordingLoop("a", [])
    assert lease.acquire(LOOP_ACTIVITY, "a", seconds=30)
    lease_clock.advance(31)
    assert lease.acquire(LOOP_ACTIVITY, "b", seconds=5)
    assert not lease.renew(LOOP_ACTIVITY, "a", seconds=5)
    assert loop.run(1.0).startswith("another loop (b)")
    assert loop.log == []


def test_a_dead_host_does_not_hold_up_the_others(node, settings):
    silent = socket.socket()  # accepts TCP, never speaks SSH: the worst kind of dead
    silent.bind(("127.0.0.3", 0))
    silent.listen()
    dead = Host.objects.create(name="dead", address="127.0.0.3", port=silent.getsockname()[1])
    loop, cycles = ProbeLoop(holder="t"), []
    deadline = time.monotonic() + 2 * settings.SSH_CONNECT_TIMEOUT + 2
    try:
        while not any(dead.pk in ids for ids, _ in cycles) and time.monotonic() < deadline:
            started = time.monotonic()
            cycles.append((loop.cycle(), time.monotonic() - started))
    finally:
        silent.close()
        loop.executor.shutdown(wait=True)
    before_dead = [ids for ids, _ in cycles[:-1]]
    # The live host was recorded cycle after cycle while the dead one was still connecting.
    assert sum(node.pk in ids for ids in before_dead) >= 2
    assert dead.pk in cycles[-1][0]
    # No cycle waited for the dead host's connect timeout.
    assert max(seconds for _, seconds in cycles) < settings.SSH_CONNECT_TIMEOUT
    dead.refresh_from_db()
    node.refresh_from_db()
    assert dead.status == Host.Status.UNREACHABLE and node.status == Host.Status.UP


def test_each_cycle_stores_history_and_sends_the_signal(node):
    heard = []

    def receiver(sender, host_ids, finished_at, **kwargs):
        heard.append((host_ids, finished_at))

    cycle_finished.connect(receiver)
    try:
        settle(ProbeLoop(holder="t"))
    finally:
        cycle_finished.disconnect(receiver)
    heard = [h for h in heard if h[0]]
    assert heard and heard[0][0] == [node.pk]
    sample = GpuMetric.objects.get(device__uuid=UUID0)
    assert (sample.utilization_gpu, sample.memory_used_mib, sample.power_w) == (37, 1000, 61.52)
    assert sample.time == heard[0][1]
    assert HostMetric.objects.get(host=node).memory_total_mib > 0
    node.refresh_from_db()
    assert node.last_probe_seconds > 0
    assert "1 hosts recorded" in Activity.objects.get(name=LOOP_ACTIVITY).last_summary


def test_a_failing_receiver_is_recorded_and_the_loop_goes_on(node):
    def broken(sender, **kwargs):
        raise RuntimeError("queue is on fire")

    cycle_finished.connect(broken)
    try:
        lease.activity(LOOP_ACTIVITY)
        settle(ProbeLoop(holder="t"))
    finally:
        cycle_finished.disconnect(broken)
    assert "queue is on fire" in Activity.objects.get(name=LOOP_ACTIVITY).last_error


def test_history_keeps_one_sample_per_history_step(node, settings):
    settings.MONITORING_HISTORY_STEP = 3600
    loop = ProbeLoop(holder="t")
    settle(loop)
    for _ in range(3):
        loop.cycle()
    assert GpuMetric.objects.filter(device__uuid=UUID0).count() == 1


def test_a_finished_loop_enqueues_its_successor(node):
    broker = get_broker()
    before = broker.queue_size()
    assert run_probe_loop(run_for=0.5).endswith("cycles")
    assert broker.queue_size() == before + 1
    assert run_probe_loop(run_for=0.5, handoff=False).endswith("cycles")
    assert broker.queue_size() == before + 1


def test_schedules_are_created_once(db):
    ensure_schedules()
    ensure_schedules()
    funcs = sorted(Schedule.objects.values_list("func", flat=True))
    assert funcs == ["monitoring.history.run_retention", "monitoring.loop.run_probe_loop"]
    assert Activity.objects.filter(lease_expires__gt=timezone.now()).count() == 0


def loop_timing_errors():
    return [e.msg for e in checks.run_checks() if e.id == "monitoring.E002"]


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"MONITORING_INTERVAL": 0}, "MONITORING_INTERVAL is 0"),
        ({"MONITORING_LEASE_SECONDS": 2.0}, "must be longer than MONITORING_INTERVAL (2)"),
        ({"MONITORING_LOOP_SECONDS": 300.0}, "below Q_TIMEOUT (120)"),
        ({"MONITORING_PROBE_THREADS": 0}, "MONITORING_PROBE_THREADS must be at least 1"),
    ],
)
def test_a_loop_timing_that_cannot_work_stops_the_start(settings, overrides, words):
    assert loop_timing_errors() == []  # the defaults work
    for name, value in overrides.items():
        setattr(settings, name, value)
    assert any(words in message for message in loop_timing_errors())
