"""Rows of the lean list endpoints (a page of reservations, of GPUs): read and written the
way their serializers would write them, without a model instance or a serializer field per
row, nor Django's conversion of each value from the database."""

import json
from datetime import UTC
from functools import cache

from django.core.exceptions import EmptyResultSet
from django.db import connections


def plain_values(queryset, *fields: str) -> list[dict]:
    """``queryset.values(*fields)`` as the database driver returns them. Django converts every
    value it reads: on a page of 1,000 reservations its conversions of the two times of each
    row (parsing, a settings lookup, making it aware) took twice as long as the query. Only
    for columns of numbers, text and times, which the drivers return as they are, except that
    SQLite's times come naive, in UTC (``iso_time`` takes both)."""
    statement = values_statement(queryset, *fields)
    return fetch_values(queryset.db, statement, fields) if statement else []


def values_statement(queryset, *fields: str) -> tuple[str, tuple] | None:
    """The SQL and parameters of ``queryset.values(*fields)``, each column named as its field;
    None when the query cannot match anything (e.g. a filter on an empty list of ids)."""
    try:
        return queryset.values(*fields).query.get_compiler(using=queryset.db).as_sql()
    except EmptyResultSet:
        return None


def fetch_values(using: str, statement: tuple[str, tuple], fields) -> list[dict]:
    """The rows of a ``values_statement``, as in ``plain_values``."""
    return [dict(zip(fields, row, strict=True)) for row in fetch_tuples(using, statement)]


def fetch_tuples(using: str, statement: tuple[str, tuple]) -> list[tuple]:
    """The rows of a ``values_statement`` as the driver returns them, in its columns' order:
    for a caller that writes each row itself, without a dict per row first."""
    with connections[using].cursor() as cursor:
        if connections[using].vendor == "postgresql":
            cursor.cursor.adapters.register_loader(*_compiled_time_loader())
        cursor.execute(*statement)
        return cursor.fetchall()


@cache
def _compiled_time_loader() -> tuple[int, type]:
    """Django reads PostgreSQL's times with a subclass of psycopg's pure-Python loader (to set
    their zone, which the session's already is: UTC), so each one is parsed in Python: a
    fifth of daphne's CPU for the week of 8 GPUs. ``fetch_tuples`` gives its cursor, and only
    it, psycopg's own loader (compiled, with psycopg[binary]): times aware in the session's
    zone. The type's oid and that loader."""
    from psycopg import postgres  # on PostgreSQL only: SQLite's processes never load it
    from psycopg.pq import Format

    oid = postgres.types["timestamptz"].oid
    return oid, postgres.adapters.get_loader(oid, Format.TEXT)


def ids_in_sql(using: str, ids: list[int]) -> tuple[str, list]:
    """SQL for ``IN (...)`` that names these ids, and its parameters: the whole list as one
    parameter where the database can unpack it (a JSON array on SQLite, an array on
    PostgreSQL). With a placeholder per id, the driver binds and the database parses each
    one: for 1,000 ids that cost more than the query."""
    vendor = connections[using].vendor
    if vendor == "sqlite":
        return "SELECT value FROM json_each(%s)", [json.dumps(ids)]
    if vendor == "postgresql":
        return "SELECT unnest(%s::bigint[])", [list(ids)]
    return ", ".join(["%s"] * len(ids)), list(ids)


def iso_time(value, zone) -> str:
    """A time as DRF's DateTimeField writes it (in the current zone, "Z" for UTC), without
    its settings lookups per value. A naive time is SQLite's, in UTC (``plain_values``)."""
    if value.tzinfo is None:
        if getattr(zone, "key", None) == "UTC":  # the default zone: nothing to convert
            return value.isoformat() + "Z"
        value = value.replace(tzinfo=UTC)
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
