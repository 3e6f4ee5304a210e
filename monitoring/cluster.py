"""The django-q2 cluster, forked from its supervisor (monitoring.supervisor).

Started as a new interpreter (`manage.py qcluster`), the cluster loaded Django and every app
again: two copies of the same 40-odd MiB, one in the supervisor and one shared by the
cluster's seven processes. Forked, the cluster and every process it forks share the
supervisor's pages, and a (re)start costs no Python start-up (bench/memory.py, 100 hosts:
56 MiB less PSS for the whole service; the README's memory section has the figures).
"""

import gc
import multiprocessing
import os
import signal
import sys
import traceback
from contextlib import suppress

from django.db import connections


class ForkedCluster:
    """`manage.py qcluster` in a forked child, in a process group of its own (stopped, or
    killed, as a whole), with ``env`` added to its environment. Waited for as
    subprocess.Popen is: ``pid``, ``poll()``, ``wait()``, ``returncode``."""

    def __init__(self, env: dict[str, str]):
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
            _run_cluster(env)  # never returns
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


def _run_cluster(env: dict[str, str]) -> None:
    """In the child: the cluster until it stops, then exit without the parent's clean-up
    (its atexit handlers are the supervisor's)."""
    code = 1
    try:
        os.setpgid(0, 0)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)  # the supervisor's handlers were its own
        os.environ.update(env)
        # The probing loop and the SSH actions use paramiko (with cryptography, about 20
        # MiB), which monitoring.transport loads when first used: loaded before the workers
        # fork, they share one copy.
        import paramiko  # noqa: F401
        from django.core.management import call_command

        call_command("qcluster")  # returns once the cluster's sentinel has started
        for child in multiprocessing.active_children():  # as qcluster's exit does
            child.join()
        code = 0
    except SystemExit as exc:  # as sys.exit() means it: None is success, a number the code
        code = 0 if exc.code is None else (exc.code if isinstance(exc.code, int) else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def close_database_connections() -> None:
    """Every database connection of this process closed, and PostgreSQL's pool with them
    (the next query opens a new one): a process forked now opens its own."""
    for connection in connections.all(initialized_only=True):
        connection.close()
        if hasattr(connection, "close_pool"):
            connection.close_pool()
