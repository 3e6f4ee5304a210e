"""SQLite, with writers that wait their turn in the process instead of failing (issue 20).

SQLite lets one writer at a time; the others poll on ``busy_timeout``, which is unfair: under
200 users booking at once some waited past the 20 s timeout and got "database is locked" (a
500) while others went ahead many times. Here each process keeps one lock for writing:

- a write transaction (``BEGIN IMMEDIATE``, see the settings) takes it first, and keeps it
  until its commit or rollback;
- a write outside a transaction (a plain save or update, a raw cursor's statement, a bulk
  ``executemany``) becomes a transaction of its own, taken the same way: one mechanism for
  every writing path, so none meets another process's writer with nothing but SQLite's
  ``busy_timeout`` (the probing loop's cycles failed so under load: "database is locked");
- threads of the process queue on it (woken at once, not by polling), so SQLite's own busy
  wait is left to writers of other processes (the workers), which keep transactions short;
- a ``BEGIN`` that SQLite still finds locked is tried again until ``DATABASE_LOCK_WAIT``
  seconds have passed since the request for the lock; then ``DatabaseBusy`` is raised, which
  the API and the pages answer with 503 and ``Retry-After`` (core.api_errors) instead
  of a 500.

Connections are kept open for the next request (a small pool per process and database):
under ASGI every request runs in a thread of its own, so each opened a connection, and a new
connection reads the whole schema (200-odd tables and indexes) before its first query: 2 to
4 ms, a good part of a small API request. See ``_Pool``.

Select it with ``ENGINE = "core.sqlite3"`` (the embedded profile does).
"""

import contextlib
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from django.conf import settings
from django.db.backends.sqlite3 import base
from django.db.utils import OperationalError

# One writer at a time in this process; see the module's docstring.
_writer = threading.Lock()

T = TypeVar("T")
# A pool's key: a connection's parameters and init commands (see DatabaseWrapper._pool_key).
PoolKey = tuple[object, ...]
# A database file's device and inode; None when it is gone or in memory.
FileIdentity = tuple[int, int] | None


class DatabaseBusy(OperationalError):
    """The database stayed locked for DATABASE_LOCK_WAIT seconds: answered 503, retry later."""


def is_locked(exc: Exception) -> bool:
    """SQLite's "locked", as Django raises it or as the sqlite3 module does (raw cursors)."""
    locked = isinstance(exc, OperationalError | sqlite3.OperationalError)
    return locked and "database is locked" in str(exc)


def _take_writer(deadline: float) -> None:
    if not _writer.acquire(timeout=max(deadline - time.monotonic(), 0)):
        raise DatabaseBusy("database is locked: other writers held it too long")


def _until_unlocked(attempt: Callable[[], T], deadline: float) -> T:
    """``attempt()`` (a BEGIN IMMEDIATE, or a write outside a transaction), again while
    SQLite says "locked" (another process writes) and time is left. Safe to repeat: SQLite
    refuses a statement's lock before the statement changes anything."""
    while True:
        try:
            return attempt()
        except (OperationalError, sqlite3.OperationalError) as exc:
            if not is_locked(exc):
                raise
            if time.monotonic() >= deadline:
                raise DatabaseBusy(str(exc)) from exc


class _Pool:
    """Idle connections of this process, by their connection parameters (file, timeout...).

    A connection comes back only outside any transaction. One is never handed out after a
    fork (SQLite forbids using a connection in a child: the pool starts empty there) nor
    after its database file was replaced (tests delete and recreate theirs): it must still
    be the same file, by device and inode.
    """

    IDLE = 8  # connections kept per database and parameters; more are closed

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[PoolKey, list[tuple[sqlite3.Connection, FileIdentity]]] = {}
        self._pid = os.getpid()

    def take(self, key: PoolKey, path: str) -> sqlite3.Connection | None:
        while (entry := self._pop(key)) is not None:
            connection, identity = entry
            if identity is not None and identity == _file_identity(path):
                return connection
            connection.close()
        return None

    def give(self, key: PoolKey, path: str, connection: sqlite3.Connection) -> None:
        try:
            if connection.in_transaction:
                connection.rollback()  # nothing uncommitted travels to the next user
        except sqlite3.Error:
            connection.close()
            return
        with self._lock:
            self._forget_if_forked()
            idle = self._idle.setdefault(key, [])
            if len(idle) < self.IDLE:
                idle.append((connection, _file_identity(path)))
                return
        connection.close()

    def _pop(self, key: PoolKey) -> tuple[sqlite3.Connection, FileIdentity] | None:
        with self._lock:
            self._forget_if_forked()
            idle = self._idle.get(key)
            return idle.pop() if idle else None

    def _forget_if_forked(self) -> None:
        if self._pid != os.getpid():  # a child's copies belong to its parent: never used
            self._idle, self._pid = {}, os.getpid()


def _file_identity(path: str) -> FileIdentity:
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        return None  # gone, or not a file (in-memory): never pooled
    return stat.st_dev, stat.st_ino


_pool = _Pool()


class DatabaseWrapper(base.DatabaseWrapper):
    # Set by Django's get_connection_params (from OPTIONS' init_command); django-stubs lacks it.
    init_commands: list[str]
    holds_writer = False

    def get_new_connection(self, conn_params: dict[str, Any]) -> sqlite3.Connection:
        key = self._pool_key(conn_params)
        connection = _pool.take(key, conn_params["database"])
        if connection is None:
            new: sqlite3.Connection = super().get_new_connection(conn_params)
            return new
        # What Django sets on a new connection, again: a user may have changed it (the
        # schema editor turns foreign keys off while it works).
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA legacy_alter_table = OFF")
        for command in self.init_commands:
            if command := command.strip():
                connection.execute(command)
        return connection

    def _pool_key(self, conn_params: dict[str, Any]) -> PoolKey:
        return tuple(sorted((k, repr(v)) for k, v in conn_params.items())) + tuple(
            self.init_commands
        )

    def create_cursor(self, name: str | None = None) -> "CursorWrapper":
        cursor: CursorWrapper = self.connection.cursor(factory=CursorWrapper)
        return cursor

    # The four hooks below are Django's (its sqlite3 and base backends), which django-stubs
    # leaves out as private: each ``type: ignore[misc]`` says only that.

    def _start_transaction_under_autocommit(self) -> None:
        deadline = time.monotonic() + settings.DATABASE_LOCK_WAIT
        _take_writer(deadline)
        self.holds_writer = True
        try:
            begin = super()._start_transaction_under_autocommit  # type: ignore[misc]
            _until_unlocked(begin, deadline)
        except BaseException:
            self._release_writer()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _close(self) -> None:
        try:
            if self.connection is not None and self._poolable():
                params = self.get_connection_params()
                with self.wrap_database_errors:
                    _pool.give(self._pool_key(params), params["database"], self.connection)
            else:
                super()._close()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _poolable(self) -> bool:
        return not self.in_atomic_block and not self.is_in_memory_db()

    def _release_writer(self) -> None:
        if self.holds_writer:
            self.holds_writer = False
            _writer.release()


class CursorWrapper(base.SQLiteCursorWrapper):
    """A write outside a transaction (a plain save, a raw statement, a bulk ``executemany``)
    waits its turn in the writer queue as a transaction does: this process's writer first,
    then SQLite's lock, tried again until DATABASE_LOCK_WAIT (then DatabaseBusy, a 503 in
    requests), instead of failing when SQLite's busy_timeout runs out."""

    # Django's signature, as django-stubs declares it (with the same ignore): params may be
    # None, which sqlite3.Cursor's may not.
    def execute(  # type: ignore[override]
        self, query: str, params: Iterable[Any] | None = None
    ) -> base.SQLiteCursorWrapper:
        if self.connection.in_transaction or _left_alone(query):
            return super().execute(query, params)
        deadline = time.monotonic() + settings.DATABASE_LOCK_WAIT
        with _holding_writer(deadline):
            # One statement: its rows (RETURNING) are read after this returns, so it runs in
            # SQLite's autocommit, which keeps the lock until they are.
            return _until_unlocked(functools.partial(super().execute, query, params), deadline)

    def executemany(  # type: ignore[override]
        self, query: str, param_list: Iterable[Iterable[Any]]
    ) -> base.SQLiteCursorWrapper:
        if self.connection.in_transaction or _left_alone(query):
            return super().executemany(query, param_list)
        deadline = time.monotonic() + settings.DATABASE_LOCK_WAIT
        with _holding_writer(deadline):
            # Many statements: in one transaction, so that a "locked" is met (and waited
            # out) before the first row, never between rows with some of them written.
            _until_unlocked(lambda: self.connection.execute("BEGIN IMMEDIATE"), deadline)
            try:
                result = super().executemany(query, param_list)
                self.connection.commit()
            except BaseException:
                if self.connection.in_transaction:  # SQLite may have rolled it back itself
                    self.connection.rollback()
                raise
            return result


# Statements run as they are: reads, and those that begin or end transactions themselves
# (or cannot run inside one).
_LEFT_ALONE = (
    "SELECT", "PRAGMA", "BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "VACUUM",
)  # fmt: skip


def _left_alone(query: str) -> bool:
    return query.lstrip()[:9].upper().startswith(_LEFT_ALONE)


@contextlib.contextmanager
def _holding_writer(deadline: float) -> Iterator[None]:
    _take_writer(deadline)
    try:
        yield
    finally:
        _writer.release()
