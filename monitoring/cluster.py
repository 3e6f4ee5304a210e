"""A function run in a forked child of the supervisor (monitoring.supervisor): the
notifications sender, a process of its own so that slow webhooks hold none of the workers.

The web process and the worker cluster are new interpreters (`python -m
core.webserver`, `manage.py qcluster`); memory is judged by PSS, and sharing pages is
no reason to fork them.
"""

import gc
import os
import signal
import sys
import traceback
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


def close_database_connections() -> None:
    """Every database connection of this process closed, and PostgreSQL's pool with them
    (the next query opens a new one): a process forked now opens its own."""
    for connection in connections.all(initialized_only=True):
        connection.close()
        if hasattr(connection, "close_pool"):
            connection.close_pool()
