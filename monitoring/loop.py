"""The probing loop: one leased loop cluster-wide probes every enabled host each interval.

django-q2 schedules resolve to about 30 s, so a scheduled task cannot fire every 2 s.
Instead one task runs a loop for ``MONITORING_LOOP_SECONDS`` (shorter than the cluster's
task timeout), holding the ``probe-loop`` lease and renewing it every cycle. When its time
is up it releases the lease and enqueues its successor, which takes over at once. A
schedule every minute restarts the loop if a worker died: the dead loop's lease expires
after ``MONITORING_LEASE_SECONDS`` and the next run takes over. A run that finds the lease
held by a live loop returns at once, so at most one worker is busy probing.
"""

import contextlib
import logging
import os
import signal
import socket
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor, wait

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.utils import timezone
from django_q.models import Schedule

from core import lease

from . import history
from .inventory import record_probe, record_steady_probes
from .models import Host
from .probes import ProbeResult, probe_host, wants_versions
from .sessions import ProbeSession, Sessions, start_session
from .signals import cycle_finished
from .transport import channel_errors

log = logging.getLogger(__name__)

LOOP_ACTIVITY = "probe-loop"
# Dashboards subscribed over Channels hear about each cycle in this group (with Redis).
LIVE_GROUP = "monitoring-live"
SCHEDULES = {
    "monitoring: probing loop (watchdog)": ("monitoring.loop.run_probe_loop", 1),
    "monitoring: history averages and retention": ("monitoring.history.run_retention", 5),
}


def interval() -> float:
    return float(settings.MONITORING_INTERVAL)


def lease_seconds() -> float:
    """How long a silent loop keeps the lease: several cycles, so a slow one is not lost."""
    return float(settings.MONITORING_LEASE_SECONDS)


def loop_seconds() -> float:
    """How long one task loops: well inside django-q2's timeout and retry (which re-run it)."""
    return float(settings.MONITORING_LOOP_SECONDS)


def run_probe_loop(run_for: float | None = None, handoff: bool = True) -> str:
    """The scheduled task. Loops while it holds the lease, then hands over to a successor."""
    loop = ProbeLoop()
    with _stopping_on_sigint(loop):
        summary = loop.run(run_for or loop_seconds())
    if handoff and loop.completed:  # if the broker cannot take it, the schedule takes over
        lease.enqueue(LOOP_ACTIVITY, "monitoring.loop.run_probe_loop")
    return summary


@contextlib.contextmanager
def _stopping_on_sigint(loop: "ProbeLoop"):
    """In a django-q2 worker (which ignores SIGINT) a SIGINT to the cluster's process group
    means "the workers stop": end the loop after its cycle and free the lease, instead of
    keeping the cluster's stop waiting for the rest of MONITORING_LOOP_SECONDS."""
    in_worker = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    )
    if in_worker:
        signal.signal(signal.SIGINT, lambda *_: loop.stop())
    try:
        yield
    finally:
        if in_worker:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def probe_once_now() -> str:
    """One cycle at once, outside the workers (`manage.py probe --all`, which the supervisor
    runs at start), so that the GPU page has data before a worker has even booted. The lease
    is held for that cycle only, then the loop task takes it; if another loop holds it, there
    is data already."""
    loop = ProbeLoop()
    if not lease.acquire(LOOP_ACTIVITY, loop.holder, lease_seconds()):
        return "another loop holds the lease"
    try:
        loop.cycle_safely()
        return f"one cycle done by {loop.holder}"
    finally:
        lease.release(LOOP_ACTIVITY, loop.holder)
        loop.executor.shutdown(wait=False, cancel_futures=True)


def ensure_schedules() -> None:
    """Create or update the monitoring schedules; safe to call on every start."""
    ensure_minute_schedules(SCHEDULES)


def ensure_minute_schedules(schedules: dict[str, tuple[str, int]]) -> None:
    """Create or update django-q2 schedules {name: (dotted function, every N minutes)}.

    Keyed by name, so every app may call it on every start without duplicating rows.
    """
    for name, (func, minutes) in schedules.items():
        Schedule.objects.update_or_create(
            name=name,
            defaults={
                "func": func,
                "schedule_type": Schedule.MINUTES,
                "minutes": minutes,
                "repeats": -1,
            },
        )


def _timed_probe(host: Host) -> tuple[ProbeResult, float, ProbeSession | None]:
    """A probe in a probe thread: a session's start and first sample (SSH hosts), or a
    one-shot probe (local hosts, or sessions turned off)."""
    started = time.monotonic()
    session = None
    try:
        if settings.MONITORING_PROBE_SESSIONS and not host.is_local:
            result, session = start_session(host)
        else:
            result = probe_host(host)
    except Exception as exc:  # a bug in probing must not end the loop; the host shows it
        log.exception("probing %s failed", host.name)
        result = ProbeResult(host.name, False, Host.Status.ERROR, f"probe failed: {exc!r}")
    return result, time.monotonic() - started, session


def _close_session(future: Future) -> None:
    if not future.cancelled():
        session = future.result()[2]
        if session is not None:
            session.close()


class ProbeLoop:
    """Probes all enabled hosts concurrently every interval while holding the lease.

    Each SSH host answers over its probe session (sessions.py); a host without one gets a
    probe thread that starts it. A host whose probe outlasts the interval (dead, hung)
    stays in flight and is recorded in the cycle in which it finishes; the other hosts are
    recorded on time meanwhile.
    """

    def __init__(self, holder: str | None = None):
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.interval = interval()
        threads = settings.MONITORING_PROBE_THREADS
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix="probe")
        self.in_flight: dict[int, tuple[Host, Future]] = {}
        self.sessions = Sessions()
        self.last_sample: dict[int, object] = {}
        self.completed = False
        self.stopping = False
        self.cycles = 0

    def stop(self) -> None:
        """Ask the loop to end after the cycle in progress (its workers are stopping)."""
        self.stopping = True

    def run(self, run_for: float) -> str:
        """Loop until run_for seconds passed or the lease is lost; returns a summary."""
        if not lease.acquire(LOOP_ACTIVITY, self.holder, lease_seconds()):
            holder, expires = lease.holder_of(LOOP_ACTIVITY)
            return f"another loop ({holder}) holds the lease until {expires:%H:%M:%S}"
        deadline = time.monotonic() + run_for
        try:
            while time.monotonic() < deadline and not self.stopping:
                started = time.monotonic()
                renewed = self.renew_safely()
                if renewed is False:
                    return f"lease lost after {self.cycles} cycles"
                if renewed:
                    self.cycle_safely()
                time.sleep(max(0.0, self.interval - (time.monotonic() - started)))
            self.completed = not self.stopping
            return f"{self.cycles} cycles" + (" (stopped)" if self.stopping else "")
        finally:
            lease.release(LOOP_ACTIVITY, self.holder)
            self.close()

    def close(self) -> None:
        """End the remote probe loops and the probe threads (connections stay pooled).

        Probe threads still starting a session are not waited for: the session they bring
        is closed when they finish, so no remote loop outlives this loop."""
        for _, future in self.in_flight.values():
            future.add_done_callback(_close_session)
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.sessions.close()

    def renew_safely(self) -> bool | None:
        """True: still ours; False: another loop took over; None: the database did not
        answer (e.g. it restarted): skip this cycle, rather than probe without the lease."""
        try:
            return lease.renew(LOOP_ACTIVITY, self.holder, lease_seconds())
        except DatabaseError as exc:
            log.error("probing loop: renewing the lease failed: %s", exc)
            close_old_connections()  # a cut connection stays broken until closed
            self.record_failure(f"renewing the lease failed: {exc}")
            return None

    def cycle_safely(self) -> None:
        """One cycle; a failure is recorded on the loop's Activity row and the loop goes on."""
        try:
            self.cycle()
        except Exception as exc:
            log.exception("probing cycle failed")
            # A connection cut by a database restart stays broken until it is closed: drop
            # it, so that recording this failure and the next cycle connect afresh.
            close_old_connections()
            self.record_failure(f"cycle failed: {type(exc).__name__}: {exc}")

    def cycle(self) -> list[int]:
        """Probe, store, signal, publish. Returns the ids of the hosts recorded."""
        started = time.monotonic()
        self.start_probes()
        # Wait for stragglers until shortly before the next cycle is due, not longer.
        deadline = started + 0.8 * self.interval
        answers, ended = self.sessions.collect(deadline)
        for host in ended:  # the remote loop or the connection ended: start again
            self.start_thread(host)
        wait([f for _, f in self.in_flight.values()], timeout=max(0, deadline - time.monotonic()))
        finished = self.take_finished(answers)
        now = timezone.now()
        self.store(finished, now)
        host_ids = [host.pk for host, _, _ in finished]
        self.cycles += 1
        self.record_cycle(len(host_ids), time.monotonic() - started)
        self.notify(host_ids, now)
        return host_ids

    def start_probes(self) -> None:
        """Ask every enabled host's session for a sample; start the missing sessions."""
        for host in Host.objects.filter(enabled=True).defer("last_snapshot"):
            if host.pk in self.in_flight:
                continue
            session = self.sessions.usable(host)
            if session is None:
                self.start_thread(host)
            elif session.asked_at is None:
                self.ask(session, host)

    def ask(self, session: ProbeSession, host: Host) -> None:
        try:
            session.ask(host, wants_versions(host))
        except channel_errors():  # the connection went: start again
            self.sessions.discard(host.pk)
            self.start_thread(host)

    def start_thread(self, host: Host) -> None:
        self.in_flight[host.pk] = (host, self.executor.submit(_timed_probe, host))

    def take_finished(self, answers) -> list[tuple[Host, ProbeResult, float]]:
        """The answered sessions, the finished probe threads, and the overdue sessions."""
        finished = [(s.host, s.result(text), s.seconds) for s, text in answers]
        done = [pk for pk, (_, future) in self.in_flight.items() if future.done()]
        for pk in done:
            host, future = self.in_flight.pop(pk)
            result, seconds, session = future.result()
            if session is not None:
                self.sessions.add(session)
            finished.append((host, result, seconds))
        finished += [(host, result, None) for host, result in self.sessions.overdue()]
        return finished

    def store(self, finished, now) -> None:
        """Record every finished probe on its host, then the history samples, in one go."""
        with transaction.atomic():
            for host, result, seconds in record_steady_probes(finished, now):
                self.record_host(host, result, seconds)
            due = [(host, result) for host, result, _ in finished if self.sample_due(host, now)]
            history.store_samples(due, now)

    def record_host(self, host: Host, result: ProbeResult, seconds: float) -> None:
        try:
            with transaction.atomic():
                record_probe(host, result, seconds=seconds)
        except DatabaseError as exc:  # e.g. the host was deleted while being probed
            self.record_failure(f"recording {host.name} failed: {exc}")

    def sample_due(self, host: Host, now) -> bool:
        """History keeps one raw sample per host per MONITORING_HISTORY_STEP, not per cycle.

        Counted per host: a slow host that finishes in odd cycles still gets its samples.
        """
        step = settings.MONITORING_HISTORY_STEP
        last = self.last_sample.get(host.pk)
        if last is not None and (now - last).total_seconds() < step - self.interval / 2:
            return False
        self.last_sample[host.pk] = now
        return True

    def record_cycle(self, hosts: int, seconds: float) -> None:
        summary = f"cycle {self.cycles}: {hosts} hosts recorded in {seconds:.2f}s"
        lease.record_success(LOOP_ACTIVITY, summary)

    def notify(self, host_ids: list[int], now) -> None:
        """Send the signal to subscribers, then tell live dashboards (channel layer)."""
        responses = cycle_finished.send_robust(sender=ProbeLoop, host_ids=host_ids, finished_at=now)
        for receiver, response in responses:
            if isinstance(response, Exception):
                name = getattr(receiver, "__qualname__", repr(receiver))
                self.record_failure(f"cycle_finished receiver {name} failed: {response!r}")
        self.publish(now)

    def publish(self, now) -> None:
        """Push to dashboards over the channel layer; with no shared layer they poll instead."""
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            message = {"type": "cycle.finished", "finished_at": now.isoformat()}
            async_to_sync(layer.group_send)(LIVE_GROUP, message)
        except Exception as exc:
            self.record_failure(f"publishing to the channel layer failed: {exc!r}")

    def record_failure(self, message: str) -> None:
        log.error("probing loop: %s", message)
        try:
            lease.record_failure(LOOP_ACTIVITY, message[:2000])
        except DatabaseError:
            log.exception("could not record the loop's failure")
