"""Access facts kept by a process for as long as the database says they have not changed.

Every start asks the start rule, which reads the user's grants, bans and UNIX account: six to
nine queries, the same answers nearly every time (an admin changes them now and then, a user
starts work all day). A process keeps those answers (``recall`` and ``keep``) under a token the
database itself changes, in the same transaction, on every change to what they are read from:
the tables ``tracked`` names, with triggers on each (installed after every migrate). So an
admin's change, from any process and any path (admin, API, shell, raw SQL, a rolled-back
transaction), counts at the next decision, as it did when every decision read it all, and a
decision costs one small read instead (``one_token``). The token is random, never a counter:
a transaction that changed the facts and rolled back leaves a token no later state can have
again, so nothing kept from inside it is ever taken for the facts after.

Kept answers are read after the token: when a change commits between the two, they are newer
than their token, and the next decision reads the new token and reads them again.
"""

import os
import threading
from contextlib import contextmanager
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, connections

from monitoring.models import Host

from .models import AccessChange, Ban, Grant, HostAccount, Profile, RunAsAllowance, Window

# Triggers carry this prefix and version: a new definition gets a new version, and triggers
# of other versions are dropped when it is installed.
BASE = "hive_access_changed"
PREFIX = f"{BASE}_v1"

# Once this many answers are kept under one token, the oldest half is dropped (users × hosts).
LIMIT = 20_000


def tracked() -> dict[str, tuple[str, ...]]:
    """Table -> the columns whose update counts (empty: every change counts)."""
    User = get_user_model()
    whole = [
        Grant,
        Window,
        Grant.users.through,
        Grant.groups.through,
        Grant.hosts.through,
        Grant.devices.through,
        User.groups.through,
        Ban,
        Profile,
        HostAccount,
        RunAsAllowance,
    ]
    tables = {model._meta.db_table: () for model in whole}
    # Hosts and users change all day (probes, sign-ins); the rule's answers name them, and a
    # host's monitoring account refuses that account to everybody.
    tables[Host._meta.db_table] = ("name", "username")
    tables[User._meta.db_table] = (User.USERNAME_FIELD,)
    return tables


# --- reading --------------------------------------------------------------------------------

_lock = threading.Lock()
_kept: dict[str, Any] = {"token": None, "answers": {}}


_TOKEN_SQL = f"SELECT token FROM {AccessChange._meta.db_table} WHERE id = 1"  # noqa: S608


def token() -> str | None:
    """The current token (None before the first change: then nothing is kept)."""
    with connection.cursor() as cursor:
        cursor.execute(_TOKEN_SQL)
        row = cursor.fetchone()
    return row[0] if row else None


_one = threading.local()  # .token: the token one_token read, for this thread


@contextmanager
def one_token():
    """Within this, kept facts are looked up under the token read once, at its start: a
    decision about many hosts (a queue round, the placement answer) reads it once instead of
    once per host. What it reads is the facts as they were then; a change made meanwhile
    counts at the next decision."""
    if hasattr(_one, "token"):  # within one already
        yield
        return
    _one.token = token()
    try:
        yield
    finally:
        del _one.token


MISSING = object()  # what ``recall`` finds when nothing is kept under the key


def recall(key: tuple) -> tuple[str | None, Any]:
    """(the current token, what ``keep`` kept under ``key`` with it, or MISSING). The caller
    reads the fact itself on a miss and hands it to ``keep`` with that token, so the call
    goes down only; callers must not change what they get."""
    current = _one.token if hasattr(_one, "token") else token()
    if current is None:
        return None, MISSING
    with _lock:
        if _kept["token"] != current:
            _kept.update(token=current, answers={})
        return current, _kept["answers"].get(key, MISSING)


def keep(current: str | None, key: tuple, answer: Any) -> Any:
    """Keep ``answer`` under ``key``, if the token is still the one ``recall`` gave (a change
    meanwhile makes it stale: then it is only returned). Returns ``answer``."""
    if current is None:
        return answer
    with _lock:
        if _kept["token"] == current:
            answers = _kept["answers"]
            if len(answers) >= LIMIT:
                for old in list(answers)[: LIMIT // 2]:
                    del answers[old]
            answers[key] = answer
    return answer


def forget() -> None:
    """Drop every kept answer (tests that count queries start from none)."""
    with _lock:
        _kept.update(token=None, answers={})


def _after_fork_in_child() -> None:
    # The workers fork from the cluster: a lock another thread held then would stay held.
    global _lock
    _lock = threading.Lock()
    forget()


os.register_at_fork(after_in_child=_after_fork_in_child)


# --- the triggers -----------------------------------------------------------------------------


def drop_triggers(db) -> None:
    """Remove every trigger of the prefix (before the token's table goes: a trigger left
    would make every change to its table fail)."""
    install = _dialect(db)
    with db.cursor() as cursor:
        for name, table in install.present(cursor).items():
            cursor.execute(install.drop(db, name, table))
        for sql in install.cleanup:
            cursor.execute(sql)


def install_triggers(sender=None, using="default", **kwargs) -> None:
    """Put the triggers on every tracked table (post_migrate: a migrate that rebuilds a table,
    as SQLite's do, drops its triggers); those already there are left, others of the prefix
    dropped. Tables not there yet (a migrate backwards) get theirs at the next migrate."""
    db = connections[using]
    existing = set(db.introspection.table_names())
    if AccessChange._meta.db_table not in existing:
        return
    install = _dialect(db)
    wanted = {}
    for table, columns in tracked().items():
        if table in existing:
            wanted.update(install.triggers(db, table, columns))
    with db.cursor() as cursor:
        present = install.present(cursor)
        for name, table in present.items():
            if name not in wanted:
                cursor.execute(install.drop(db, name, table))
        missing = [sql for name, (table, sql) in wanted.items() if name not in present]
        if missing:
            for sql in install.prepare:
                cursor.execute(sql)
            for sql in missing:
                cursor.execute(sql)
            # Changes made while a trigger was missing (a rebuilt table) count too.
            for sql in install.NEW_TOKEN:
                cursor.execute(sql)


def _dialect(db) -> type:
    """How triggers are written and found on this database (SQLite or PostgreSQL)."""
    return _SQLITE if db.vendor == "sqlite" else _POSTGRESQL


def _changed_columns(columns: tuple[str, ...], differs: str = "IS DISTINCT FROM") -> str:
    return " OR ".join(f"OLD.{c} {differs} NEW.{c}" for c in columns)


def _trigger_names(cursor, sql: str) -> dict[str, str]:
    """Name -> table of the triggers of the prefix, as ``sql`` (with one LIKE) lists them."""
    cursor.execute(sql, [f"{BASE}%"])
    return dict(cursor.fetchall())


class _SQLITE:
    """Row triggers: SQLite has no statement triggers; a row's change sets a new token.
    (No conflict clause: the statement that fires a trigger imposes its own, so a REPLACE
    here would become the IGNORE of Django's many-to-many inserts.)"""

    prepare = cleanup = ()
    _TABLE = AccessChange._meta.db_table
    _RANDOM = "lower(hex(randomblob(16)))"
    NEW_TOKEN = (
        f"UPDATE {_TABLE} SET token = {_RANDOM} WHERE id = 1",  # noqa: S608 (our table)
        f"INSERT INTO {_TABLE} (id, token) SELECT 1, {_RANDOM} "  # noqa: S608
        f"WHERE NOT EXISTS (SELECT 1 FROM {_TABLE} WHERE id = 1)",
    )

    @classmethod
    def triggers(cls, db, table: str, columns: tuple[str, ...]) -> dict[str, tuple[str, str]]:
        quoted, found = db.ops.quote_name(table), {}
        for event in ("INSERT", "UPDATE", "DELETE"):
            name = f"{PREFIX}_{table}_{event.lower()}"
            when = ""
            if event == "UPDATE" and columns:
                event = f"UPDATE OF {', '.join(columns)}"
                when = f" WHEN {_changed_columns(columns, differs='IS NOT')}"  # (SQLite < 3.39)
            body = "; ".join(cls.NEW_TOKEN)
            sql = f"CREATE TRIGGER {name} AFTER {event} ON {quoted}{when} BEGIN {body}; END"
            found[name] = (table, sql)
        return found

    @staticmethod
    def present(cursor) -> dict[str, str]:
        return _trigger_names(
            cursor,
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' AND name LIKE %s",
        )

    @staticmethod
    def drop(db, name: str, table: str) -> str:
        return f"DROP TRIGGER IF EXISTS {db.ops.quote_name(name)}"


class _POSTGRESQL:
    """Statement triggers (one new token per statement, TRUNCATE included), and row triggers
    for the tables where only some columns count."""

    FUNCTION = f"{PREFIX}_fn"
    NEW_TOKEN = (
        f"INSERT INTO {AccessChange._meta.db_table} (id, token) "  # noqa: S608 (our table)
        "VALUES (1, gen_random_uuid()::text) ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token",
    )
    cleanup = (f"DROP FUNCTION IF EXISTS {FUNCTION}()",)
    prepare = (
        f"CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN {NEW_TOKEN[0]}; RETURN NULL; END $$",
    )

    @classmethod
    def triggers(cls, db, table: str, columns: tuple[str, ...]) -> dict[str, tuple[str, str]]:
        quoted, run = db.ops.quote_name(table), f"EXECUTE FUNCTION {cls.FUNCTION}()"
        # Every update counts, or (some columns named) only a row whose columns changed.
        events = (
            "INSERT OR DELETE OR TRUNCATE" if columns else "INSERT OR UPDATE OR DELETE OR TRUNCATE"
        )
        name = f"{PREFIX}_{table}"[:63]
        found = {
            name: (
                table,
                f"CREATE TRIGGER {name} AFTER {events} ON {quoted} FOR EACH STATEMENT {run}",
            )
        }
        if columns:
            renamed = f"{PREFIX}_{table}_renamed"[:63]
            found[renamed] = (
                table,
                f"CREATE TRIGGER {renamed} AFTER UPDATE ON {quoted} FOR EACH ROW "
                f"WHEN ({_changed_columns(columns)}) {run}",
            )
        return found

    @staticmethod
    def present(cursor) -> dict[str, str]:
        return _trigger_names(
            cursor,
            "SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND t.tgname LIKE %s",
        )

    @staticmethod
    def drop(db, name: str, table: str) -> str:
        return f"DROP TRIGGER IF EXISTS {db.ops.quote_name(name)} ON {db.ops.quote_name(table)}"
