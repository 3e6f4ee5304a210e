"""The django-q2 cluster, forked from its supervisor (monitoring.supervisor); `serve` forks
its web process the same way (``ForkedChild``).

Started as a new interpreter (`manage.py qcluster`), the cluster loaded Django and every app
again: two copies of the same 40-odd MiB, one in the supervisor and one shared by the
cluster's seven processes. Forked, the cluster and every process it forks share the
supervisor's pages, and a (re)start costs no Python start-up (bench/memory.py, 100 hosts:
56 MiB less PSS for the whole service; bench/RESULTS.md, Memory, has the figures).

The forked child is the cluster's sentinel itself. `manage.py qcluster` runs a top process
that only starts the sentinel and waits for a stop signal to pass on: one more copy of the
supervisor's heap in the process list (about 60 MiB RSS, 9 MiB of its own) for a wait. Here
the sentinel takes the stop signals itself; its pusher, monitor and workers are what they are
under qcluster.
"""

import gc
import multiprocessing
import os
import signal
import sys
import threading
import traceback
import uuid
from contextlib import suppress

from django.db import connections


class ForkedChild:
    """``work()`` in a forked child, in a process group of its own (stopped, or killed, as a
    whole), with the default signal handlers. Waited for as subprocess.Popen is: ``pid``,
    ``poll()``, ``wait()``, ``returncode`` (0 when ``work`` returned)."""

    def __init__(self, work):
        close_database_connections()  # the child must not talk through this one's sockets
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()  # what exists now is shared with the child: left out of its collections
        try:
            pid = os.fork()
        except OSError:  # no child (EAGAIN, ENOMEM): this process goes on as it was
            gc.unfreeze()
            raise
        if pid == 0:
            _child(work)  # never returns
        gc.unfreeze()
        with suppress(OSError):  # here too: no signal to the group can come before its own
            os.setpgid(pid, pid)
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


class ForkedCluster(ForkedChild):
    """A django-q2 cluster (as `manage.py qcluster` runs it) in a forked child, with ``env``
    added to its environment."""

    def __init__(self, env: dict[str, str]):
        super().__init__(lambda: _run_cluster(env))


def _run_cluster(env: dict[str, str]) -> None:
    os.environ.update(env)
    # The probing loop and the SSH actions use paramiko (with cryptography, about 20 MiB),
    # which monitoring.transport loads when first used: loaded before the workers fork, they
    # share one copy.
    import paramiko  # noqa: F401

    run_sentinel()
    for child in multiprocessing.active_children():  # as qcluster's exit does
        child.join()


def _child(work) -> None:
    """In the forked child: ``work()``, then exit without the parent's clean-up (its atexit
    handlers are the parent's)."""
    code = 1
    try:
        os.setpgid(0, 0)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)  # the parent's handlers were its own
        work()
        code = 0
    except SystemExit as exc:  # as sys.exit() means it: None is success, a number the code
        code = 0 if exc.code is None else (exc.code if isinstance(exc.code, int) else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_sentinel() -> None:
    """django-q2's sentinel in this process, until SIGINT or SIGTERM stops it as qcluster's
    top process would: the stop event set, the workers let finish their tasks."""
    from django.conf import settings
    from django_q.cluster import Sentinel, get_mp_context
    from django_q.conf import setproctitle

    settings.SECRET_KEY  # noqa: B018 -- as qcluster: no cluster without a signing key
    context = get_mp_context()
    stop_event, start_event = context.Event(), context.Event()
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    # Held until this process's handlers are in: Sentinel() sets the ones its children need.
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    sentinel = Sentinel(stop_event, start_event, uuid.uuid4(), start=False)
    if setproctitle:
        setproctitle.setproctitle(f"qcluster sentinel {os.getpid()}")

    def stop(signum, frame):
        # Set from a thread: the handler may run while this thread holds the event's lock
        # (in its wait), which set() takes too.
        threading.Thread(target=stop_event.set, daemon=True).start()

    def as_under_qcluster():
        if os.getppid() == sentinel.pid:  # a process the sentinel forked, not a grandchild
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # what Sentinel() set for them
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a timed-out worker is terminated

    os.register_at_fork(after_in_child=as_under_qcluster)
    for signum in stop_signals:
        signal.signal(signum, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
    sentinel.start()  # spawns the pusher, monitor and workers; guards them until stopped


def close_database_connections() -> None:
    """Every database connection of this process closed, and PostgreSQL's pool with them
    (the next query opens a new one): a process forked now opens its own."""
    for connection in connections.all(initialized_only=True):
        connection.close()
        if hasattr(connection, "close_pool"):
            connection.close_pool()
