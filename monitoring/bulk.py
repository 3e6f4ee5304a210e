"""Writing many rows with one statement per table, for the probing loop's hot path.

Django's bulk_update builds a CASE expression per field and row, and bulk_create compiles
every row into one long statement: at hundreds of hosts every cycle that cost more CPU than
the probing itself. These send one prepared statement with executemany instead, with the
values prepared by the model's own fields. Like bulk_update and bulk_create, they send no
signals.
"""

from django.db import connection


def update_many(objects: list, fields: list[str]) -> None:
    """UPDATE each object's fields, by primary key."""
    if not objects:
        return
    meta = type(objects[0])._meta
    columns = [meta.get_field(name) for name in fields]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in columns)
    # Only the model's own table and column names go into the text; values are parameters.
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"  # noqa: S608
    rows = [[_value(field, obj) for field in columns] + [obj.pk] for obj in objects]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def insert_many(model, objects: list) -> None:
    """INSERT new objects (their primary keys are not read back)."""
    if not objects:
        return
    meta = model._meta
    columns = [field for field in meta.concrete_fields if field is not meta.auto_field]
    quote = connection.ops.quote_name
    names = ", ".join(quote(field.column) for field in columns)
    placeholders = ", ".join(["%s"] * len(columns))
    sql = f"INSERT INTO {quote(meta.db_table)} ({names}) VALUES ({placeholders})"  # noqa: S608
    rows = [[_value(field, obj, add=True) for field in columns] for obj in objects]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _value(field, obj, add: bool = False):
    return field.get_db_prep_save(field.pre_save(obj, add), connection)
