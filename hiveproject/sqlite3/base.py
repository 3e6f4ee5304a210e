"""SQLite, with writers that wait their turn in the process instead of failing (issue 20).

SQLite lets one writer at a time; the others poll on ``busy_timeout``, which is unfair: under
200 users booking at once some waited past the 20 s timeout and got "database is locked" (a
500) while others went ahead many times. Here each process keeps one lock for writing:

- a write transaction (``BEGIN IMMEDIATE``, see the settings) takes it first, and keeps it
  until its commit or rollback; a write outside a transaction holds it for its statement;
- threads of the process queue on it (woken at once, not by polling), so SQLite's own busy
  wait is left to writers of other processes (the workers), which keep transactions short;
- a ``BEGIN`` that SQLite still finds locked is tried again until ``DATABASE_LOCK_WAIT``
  seconds have passed since the request for the lock; then ``DatabaseBusy`` is raised, which
  the API and the pages answer with 503 and ``Retry-After`` (hiveproject.api_errors) instead
  of a 500.

Select it with ``ENGINE = "hiveproject.sqlite3"`` (the embedded profile does).
"""

import threading
import time

from django.conf import settings
from django.db.backends.sqlite3 import base
from django.db.utils import OperationalError

# One writer at a time in this process; see the module's docstring.
_writer = threading.Lock()


class DatabaseBusy(OperationalError):
    """The database stayed locked for DATABASE_LOCK_WAIT seconds: answered 503, retry later."""


def is_locked(exc: Exception) -> bool:
    return isinstance(exc, OperationalError) and "database is locked" in str(exc)


def _take_writer(deadline: float) -> None:
    if not _writer.acquire(timeout=max(deadline - time.monotonic(), 0)):
        raise DatabaseBusy("database is locked: other writers held it too long")


class DatabaseWrapper(base.DatabaseWrapper):
    holds_writer = False

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=CursorWrapper)

    def _start_transaction_under_autocommit(self):
        deadline = time.monotonic() + settings.DATABASE_LOCK_WAIT
        _take_writer(deadline)
        self.holds_writer = True
        try:
            self._begin_before(deadline)
        except BaseException:
            self._release_writer()
            raise

    def _begin_before(self, deadline: float) -> None:
        """BEGIN, again while SQLite says "locked" (another process writes) and time is left."""
        while True:
            try:
                return super()._start_transaction_under_autocommit()
            except OperationalError as exc:
                if not is_locked(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise DatabaseBusy(str(exc)) from exc

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._release_writer()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release_writer()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._release_writer()

    def _release_writer(self) -> None:
        if self.holds_writer:
            self.holds_writer = False
            _writer.release()


class CursorWrapper(base.SQLiteCursorWrapper):
    """A write outside a transaction (a plain save) takes the process's writer lock for its
    statement, so it queues with the transactions instead of polling against them."""

    def execute(self, query, params=None):
        if self.connection.in_transaction or _is_read(query):
            return super().execute(query, params)
        with _writer_for_statement():
            return super().execute(query, params)

    def executemany(self, query, param_list):
        if self.connection.in_transaction or _is_read(query):
            return super().executemany(query, param_list)
        with _writer_for_statement():
            return super().executemany(query, param_list)


def _is_read(query: str) -> bool:
    return query.lstrip()[:6].upper() in ("SELECT", "PRAGMA", "BEGIN ", "COMMIT", "ROLLBA")


class _writer_for_statement:  # noqa: N801 (used as a context manager, like a function)
    def __enter__(self):
        _take_writer(time.monotonic() + settings.DATABASE_LOCK_WAIT)

    def __exit__(self, *exc):
        _writer.release()
