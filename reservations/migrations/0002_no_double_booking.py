"""No double booking, enforced by the database itself.

PostgreSQL: an exclusion constraint over (device, [start, end)) for holding rows, which
needs the btree_gist extension. SQLite: triggers that abort an insert or update creating an
overlap. Both report the name ``reserved_device_no_overlap``, which the service turns into
a clear validation error.
"""

from django.db import migrations

TABLE = "reservations_reserveddevice"
NAME = "reserved_device_no_overlap"

POSTGRES_UP = [
    "CREATE EXTENSION IF NOT EXISTS btree_gist",
    f"""ALTER TABLE {TABLE} ADD CONSTRAINT {NAME} EXCLUDE USING gist
        (device_id WITH =, tstzrange("start", "end", '[)') WITH &&) WHERE (holds)""",
]
POSTGRES_DOWN = [f"ALTER TABLE {TABLE} DROP CONSTRAINT {NAME}"]

# Timestamps are stored as UTC text of one format, so text comparison orders them.
_OVERLAP = f"""NEW.holds AND EXISTS (
    SELECT 1 FROM {TABLE} AS r
    WHERE r.device_id = NEW.device_id AND r.holds AND r.id IS NOT NEW.id
      AND r."start" < NEW."end" AND NEW."start" < r."end")"""
SQLITE_UP = [
    f"""CREATE TRIGGER {NAME}_insert BEFORE INSERT ON {TABLE} WHEN {_OVERLAP}
        BEGIN SELECT RAISE(ABORT, '{NAME}'); END""",
    f"""CREATE TRIGGER {NAME}_update BEFORE UPDATE ON {TABLE} WHEN {_OVERLAP}
        BEGIN SELECT RAISE(ABORT, '{NAME}'); END""",
]
SQLITE_DOWN = [f"DROP TRIGGER {NAME}_insert", f"DROP TRIGGER {NAME}_update"]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor)
        if statements is None:
            raise RuntimeError(
                f"no double-booking guard for {schema_editor.connection.vendor}; "
                "use PostgreSQL or SQLite"
            )
        for sql in statements:
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("reservations", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_UP, "sqlite": SQLITE_UP}),
            _run({"postgresql": POSTGRES_DOWN, "sqlite": SQLITE_DOWN}),
        )
    ]
