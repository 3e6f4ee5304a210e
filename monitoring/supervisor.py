"""Supervised workers: the django-q2 cluster watched from above and restarted when it stalls.

django-q2's workers take tasks from one multiprocessing queue under one lock. A worker killed
(SIGKILL, as the OOM killer does) while it waits as next in line dies holding that lock: the
others wait on it for ever, the sentinel "reincarnates" the dead one, which waits too, and the
cluster looks alive while doing nothing (django-q2 issue #23). Its own stop then waits for
those workers as well. Nothing inside the cluster can free the lock, so the cluster runs in a
process group of its own under this supervisor (`manage.py qcluster`), which

- probes once at start (`manage.py probe --all`, a process of its own) and queues the
  probing loop at once, rather than after the scheduler's first pass (about 30 s);
- keeps a heartbeat: each worker notes the tasks it starts and finishes in a state directory
  (files, no database write per task). When no task finished for ``WORKERS_STALL_SECONDS``
  while work was due (a heartbeat task it queued itself when all was quiet) and a worker was
  free to take it, the cluster is stalled: it is killed as a whole and started again, the
  reason recorded on its ``WorkerCluster`` row and in the audit log;
- stops it with SIGINT to the group and SIGKILL to what is left after
  ``WORKERS_STOP_GRACE_SECONDS``, returning only when no process of the group is left.
"""

import gc
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from django.db import DatabaseError, close_old_connections
from django.dispatch import receiver
from django.utils import timezone
from django_q.signals import post_execute_in_worker, post_spawn, pre_execute

from audit.log import record
from core import lease
from core.models import Activity

from .cluster import ForkedChild
from .loop import LOOP_ACTIVITY
from .models import WorkerCluster

log = logging.getLogger("gpuhive.workers")

# Set by the supervisor for its cluster: where the workers note their tasks.
STATE_ENV = "HIVE_WORKERS_STATE"
ACTIVITY = "workers"
BEAT_TASK = "monitoring.supervisor.beat"
SUMMARY_EVERY = 60  # seconds between the console's summary lines
KEEP_STOPPED = timedelta(days=7)
MANAGE = Path(__file__).resolve().parents[1] / "manage.py"
# Seconds the first probing cycle may take (bounded by its SSH timeouts; this is for a hang).
FIRST_CYCLE = 120


def beat() -> str:
    """The heartbeat task: doing nothing, it proves that a worker takes tasks."""
    return "ok"


# --- In the workers: notes for the supervisor ------------------------------------------------

_done_here = 0  # tasks this worker process finished


def _state_dir() -> Path | None:
    state = os.environ.get(STATE_ENV)
    return Path(state) if state else None


@receiver(post_spawn, dispatch_uid="workers-freeze-inherited")
def _freeze_inherited_objects(sender, proc_name, **kwargs):
    """A worker is forked from the cluster and shares its memory until a page is written.
    Python's full collections write to every object they visit, so each worker would soon
    hold a private copy of most of what it inherited (20-40 MiB each, bench/memory.py).
    Frozen, the inherited objects are left out of collections; new ones are collected."""
    gc.freeze()


@receiver(post_spawn, dispatch_uid="workers-state-ready")
def _worker_ready(sender, proc_name, **kwargs):
    _note(f"done-{os.getpid()}", "0")


@receiver(pre_execute, dispatch_uid="workers-state-busy")
def _task_started(sender, func, task, **kwargs):
    _note(f"busy-{os.getpid()}", str(task.get("name", "")))


@receiver(post_execute_in_worker, dispatch_uid="workers-state-done")
def _task_finished(sender, func, task, **kwargs):
    global _done_here
    _done_here += 1
    _note(f"done-{os.getpid()}", str(_done_here))
    _note(f"busy-{os.getpid()}", None)


def _note(name: str, text: str | None) -> None:
    """Write (or with None remove) a note; never raises: it runs inside django-q2's worker,
    where an exception would end the worker."""
    state = _state_dir()
    if state is None:
        return
    try:
        if text is None:
            (state / name).unlink(missing_ok=True)
        else:
            (state / name).write_text(text)
    except OSError:
        pass


# --- Processes -----------------------------------------------------------------------------


def group_members(pgid: int) -> list[int]:
    """Live processes (zombies aside) of a process group, read from /proc."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        state, _ppid, pgrp = stat.rpartition(")")[2].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            members.append(int(entry.name))
    return members


def stop_group(proc: subprocess.Popen, grace: float, first=signal.SIGINT) -> bool:
    """Signal a child's process group, SIGKILL what is left after ``grace`` seconds, and wait
    until none of it is left. True if it stopped without SIGKILL."""
    _signal_group(proc.pid, first)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader, so that it does not count as left
        if not group_members(proc.pid):
            return True
        time.sleep(0.1)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # the init process reaps orphans killed with the group
    return False


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


@dataclass
class WorkerState:
    """What the workers noted: tasks finished, the last one's time, workers busy now."""

    done: int = 0
    last_done: float | None = None
    busy: int = 0
    ready: bool = False


class Supervisor:
    """Runs one django-q2 cluster and restarts it when it stalls. The owner (``serve`` or
    ``manage.py workers``) calls ``start()``, then ``check()`` about every second, then
    ``stop()``."""

    def __init__(self):
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.stall = float(settings.WORKERS_STALL_SECONDS)
        self.grace = float(settings.WORKERS_STOP_GRACE_SECONDS)
        self.workers = int(settings.Q_CLUSTER["workers"])
        # Quiet this long (no task finished): queue a heartbeat task, so that work is due.
        self.beat_after = max(2 * float(settings.MONITORING_INTERVAL), 2.0, self.stall / 5)
        self.cluster: subprocess.Popen | None = None
        # Notifications are sent apart from the cluster (notifications.sender).
        self.sender: ForkedChild | None = None
        self.state_dir: Path | None = None
        self.restarts = 0
        self.done_before = 0  # tasks finished by the clusters this one replaced
        self._row_written = 0.0
        self._summary = (time.monotonic(), 0)

    # -- lifecycle

    def start(self) -> None:
        self._save_row(started_at=timezone.now(), stopped_at=None)
        try:  # rows of clusters gone long ago (stopped, or silent: their machine died)
            WorkerCluster.objects.filter(last_check_at__lt=timezone.now() - KEEP_STOPPED).delete()
        except DatabaseError:
            pass
        self._start_sender()  # first: titled by the time anyone looks for the cluster
        self._start_cluster()
        self._probe_at_once()

    def stop(self) -> None:
        """Stop the cluster (and wait for all its processes); the supervisor is done."""
        if self.sender is not None:
            stop_group(self.sender, self.grace, signal.SIGTERM)
        if self.cluster is not None:
            self._stop_cluster()
        self._save_row(stopped_at=timezone.now())

    def restart(self, reason: str) -> None:
        log.error("workers: %s; restarting the cluster", reason)
        self._stop_cluster()
        self.restarts += 1
        now = timezone.now()
        self._record_restart(reason, now)
        self._start_cluster()
        self._probe_at_once()

    # -- the heartbeat

    def check(self) -> None:
        """One look at the cluster: restart it if it exited or stalled; keep the heartbeat."""
        close_old_connections()  # a long-lived process: drop connections a restart cut
        self._keep_sender()
        code = self.cluster.poll()
        if code is not None:
            # One that cannot even start (bad settings) is retried once per stall period,
            # not in a tight loop of restarts and audit records.
            if time.time() - self.cluster_started >= self.stall:
                self.restart(f"the cluster exited by itself (code {code})")
            return
        state = self.read_state()
        now = time.time()
        last = max(state.last_done or 0.0, self.cluster_started)
        if state.ready and now - last >= self.beat_after:
            self._make_work_due(now)
        else:
            self.due_since = None
        stalled = self.due_since is not None and now - self.due_since >= self.stall
        if stalled and state.busy < self.workers:
            self.restart(
                f"no task finished for {now - last:.0f}s while work was due and "
                f"{self.workers - state.busy} of {self.workers} workers were free"
            )
            return
        self._heartbeat(state)

    def _make_work_due(self, now: float) -> None:
        """All quiet: queue a heartbeat task (again every half a quiet period). Work is due
        only once one was queued: with the database or Redis gone a restart would not help,
        and the failure to queue is recorded on the activity."""
        if now - self.last_beat < self.beat_after / 2:
            return
        self.last_beat = now
        queued = lease.enqueue(ACTIVITY, BEAT_TASK, task_name="workers heartbeat", save=False)
        if queued and self.due_since is None:
            self.due_since = now

    def read_state(self) -> WorkerState:
        state = WorkerState()
        members = set(group_members(self.cluster.pid))
        for entry in os.scandir(self.state_dir):
            kind, _, pid = entry.name.partition("-")
            try:
                if kind == "done":  # written when the worker is up, then after each task
                    done = int(Path(entry.path).read_text() or 0)
                    state.ready, state.done = True, state.done + done
                    if done:
                        state.last_done = max(state.last_done or 0.0, entry.stat().st_mtime)
                elif kind == "busy" and int(pid) in members:
                    state.busy += 1
            except (OSError, ValueError):  # written or removed meanwhile
                continue
        return state

    def _heartbeat(self, state: WorkerState) -> None:
        """The row admins and /healthz read (every few seconds), and a line a minute."""
        now = time.monotonic()
        if now - self._row_written >= min(5.0, self.stall / 3):
            self._row_written = now
            last = state.last_done
            fields = {"tasks_done": self.done_before + state.done}
            if last is not None:
                fields["last_task_at"] = datetime.fromtimestamp(last, tz=UTC)
            self._save_row(**fields)
        since, done_then = self._summary
        if now - since >= SUMMARY_EVERY:
            total = self.done_before + state.done
            self._summary = (now, total)
            log.info(
                "workers: %d tasks in the last minute, %d of %d workers busy, last probe %s, "
                "%d restarts",
                total - done_then,
                state.busy,
                self.workers,
                _probe_age(),
                self.restarts,
            )

    # -- the cluster

    def _start_cluster(self) -> None:
        # Named after this process, so that its tests find it.
        self.state_dir = Path(tempfile.mkdtemp(prefix=f"hive-workers-{os.getpid()}-"))
        self.cluster = subprocess.Popen(
            [sys.executable, str(MANAGE), "qcluster"],
            env={**os.environ, STATE_ENV: str(self.state_dir)},
            process_group=0,  # a group of its own: stopped, or killed, as a whole
        )
        self.cluster_started = time.time()
        self.due_since = None
        self.last_beat = 0.0

    def _start_sender(self) -> None:
        from notifications.sender import run_process

        self.sender = ForkedChild(run_process)
        self.sender_started = time.time()

    def _keep_sender(self) -> None:
        """A sender that exited is started again (at most once per stall period), and why
        is recorded: notifications must not stop silently."""
        code = self.sender.poll()
        if code is None or time.time() - self.sender_started < self.stall:
            return
        reason = f"the notifications sender exited (code {code}); started again"
        log.error("workers: %s", reason)
        try:
            lease.record_failure(ACTIVITY, f"{self.name}: {reason}")
        except DatabaseError:
            pass
        self._start_sender()

    def _stop_cluster(self) -> None:
        members = set(group_members(self.cluster.pid))
        self.done_before += self.read_state().done
        if not stop_group(self.cluster, self.grace):
            log.warning("workers: still running after %.0fs; killed", self.grace)
        self._release_loop_lease(members)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def _release_loop_lease(self, members: set[int]) -> None:
        """A loop killed with the cluster keeps the lease until it expires; free it, so the
        next cluster's loop probes at once."""
        try:
            holder, _ = lease.holder_of(LOOP_ACTIVITY)
            host, _, rest = holder.partition(":")
            pid = rest.partition(":")[0]
            if host == socket.gethostname() and pid.isdigit() and int(pid) in members:
                lease.release(LOOP_ACTIVITY, holder)
        except DatabaseError:
            log.exception("workers: could not free the probing loop's lease")

    def _probe_at_once(self) -> None:
        """The first cycle here and now, then the loop on the workers as soon as one is up.
        The cycle runs in a process of its own (`manage.py probe --all`; its log lines reach
        the console as this one's do): in this process, which lives as long as the service,
        it would load paramiko and keep a connection to every SSH host open for nothing
        (about 12 MiB at 100 hosts, bench/memory.py)."""
        argv = [sys.executable, str(MANAGE), "probe", "--all"]
        try:
            done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=FIRST_CYCLE)
        except subprocess.TimeoutExpired:  # killed; the loop, started next, probes
            log.error("workers: the first probing cycle took over %ds; stopped it", FIRST_CYCLE)
        else:
            if done.returncode:  # its error is on the console; the loop records its own
                log.error("workers: the first probing cycle failed (code %d)", done.returncode)
            else:
                log.debug("workers: %s", done.stdout.strip())
        lease.enqueue(LOOP_ACTIVITY, "monitoring.loop.run_probe_loop")

    # -- records

    def _save_row(self, **fields) -> None:
        fields["last_check_at"] = timezone.now()
        try:
            if not WorkerCluster.objects.filter(name=self.name).update(**fields):
                fields.setdefault("started_at", timezone.now())
                WorkerCluster.objects.create(name=self.name, **fields)
        except DatabaseError as exc:  # the database is down: the heartbeat waits for it
            log.error("workers: could not write the heartbeat: %s", exc)

    def _record_restart(self, reason: str, when) -> None:
        try:
            self._save_row(restarts=self.restarts, last_restart_at=when, last_restart_reason=reason)
            lease.record_failure(ACTIVITY, f"{self.name}: restarted the cluster: {reason}")
            record("workers.restarted", target=self.name, reason=reason)
        except DatabaseError:
            log.exception("workers: could not record the restart")


def _probe_age() -> str:
    when = Activity.objects.filter(name=LOOP_ACTIVITY).values_list("last_success_at", flat=True)
    try:
        last = when.first()
    except DatabaseError:
        return "unknown (the database does not answer)"
    if last is None:
        return "never"
    return f"{(timezone.now() - last).total_seconds():.0f}s ago"


def check_apart() -> None:
    """Django's system checks, run as `manage.py check` in a process of its own before a
    long-lived command (serve, workers) starts anything. Checking imports every URL, view
    and admin module: about 30 MiB that the command, which only supervises, would otherwise
    hold for the service's whole life. Warnings and errors reach the console (stderr) as
    before; failed checks stop the start. With the database's checks: a database that a newer
    version migrated stops it too (monitoring.dbversion)."""
    argv = [sys.executable, str(MANAGE), "check", "--database", "default"]
    done = subprocess.run(argv, stdout=subprocess.DEVNULL)
    if done.returncode:
        raise CommandError("the system checks above failed; nothing was started")


def catch_stop_signals() -> list[str]:
    """From now on SIGINT, SIGTERM and SIGHUP (the terminal closed) only note that a stop
    was asked (the list fills); the caller stops its children in order."""
    stopping: list[str] = []
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda n, _: stopping.append(signal.Signals(n).name))
    return stopping


def run_until_signalled(supervisor: Supervisor, stopping: list[str], also=None) -> str:
    """Start the supervisor and check it every second until a stop signal came (see
    ``catch_stop_signals``) or ``also()`` (e.g. the web process's check) gives a reason to
    stop; returns why. The caller then stops what it runs, in a ``finally``."""
    supervisor.start()
    next_check = time.monotonic()
    while not stopping:
        reason = also() if also else None
        if reason:
            stopping.append(reason)
            break
        if time.monotonic() >= next_check:
            _check_safely(supervisor)
            next_check = time.monotonic() + 1
        time.sleep(0.2)
    return stopping[0]


def _check_safely(supervisor: Supervisor) -> None:
    """A bug in one check must not end the service, nor go unseen."""
    try:
        supervisor.check()
    except Exception as exc:
        log.exception("workers: the supervisor's check failed")
        try:
            lease.record_failure(ACTIVITY, f"{supervisor.name}: check failed: {exc!r}")
        except DatabaseError:
            pass
