"""No double booking of shared hardware: a GPU and its MIG slices.

A booking of a GPU holds the whole board, so it may not overlap a booking of one of its MIG
slices, nor the other way round; two slices of one GPU may be booked at once. Each row gets
its device's board (the GPU of a slice, else the device itself), written by the database on
every insert and update, so no code path can leave it wrong.

PostgreSQL: the exclusion constraint of migration 0002 becomes one over (board, part,
[start, end)), where a row's part is the unbounded range for a whole GPU and [id, id + 1)
for a slice: same board, meeting parts (a whole GPU meets every part), meeting times.
SQLite: the triggers of 0002 now look for holding rows of every device sharing the new
row's hardware (itself, its GPU, its slices, as monitoring.models.sharing says). Both keep
the name ``reserved_device_no_overlap``, which the service turns into a clear error.
"""

import django.db.models.deletion
from django.db import migrations, models

TABLE = "reservations_reserveddevice"
DEVICE = "monitoring_device"
NAME = "reserved_device_no_overlap"
BOARD = "reserved_device_board"

POSTGRES_UP = [
    f"""UPDATE {TABLE} AS r SET board_id = COALESCE(d.parent_id, d.id)
        FROM {DEVICE} AS d WHERE d.id = r.device_id""",
    f"""CREATE FUNCTION {BOARD}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            SELECT COALESCE(parent_id, id) INTO NEW.board_id FROM {DEVICE}
                WHERE id = NEW.device_id;
            RETURN NEW;
        END $$""",
    f"""CREATE TRIGGER {BOARD} BEFORE INSERT OR UPDATE ON {TABLE}
        FOR EACH ROW EXECUTE FUNCTION {BOARD}()""",
    f"ALTER TABLE {TABLE} DROP CONSTRAINT {NAME}",
    f"""ALTER TABLE {TABLE} ADD CONSTRAINT {NAME} EXCLUDE USING gist (
        board_id WITH =,
        (CASE WHEN device_id = board_id THEN int8range(NULL, NULL)
              ELSE int8range(device_id, device_id + 1) END) WITH &&,
        tstzrange("start", "end", '[)') WITH &&
    ) WHERE (holds)""",
]
POSTGRES_DOWN = [
    f"ALTER TABLE {TABLE} DROP CONSTRAINT {NAME}",
    f"""ALTER TABLE {TABLE} ADD CONSTRAINT {NAME} EXCLUDE USING gist
        (device_id WITH =, tstzrange("start", "end", '[)') WITH &&) WHERE (holds)""",
    f"DROP TRIGGER {BOARD} ON {TABLE}",
    f"DROP FUNCTION {BOARD}()",
]

# The devices sharing NEW's hardware: itself, its GPU, its slices.
_SHARING = f"""SELECT NEW.device_id
    UNION SELECT parent_id FROM {DEVICE} WHERE id = NEW.device_id AND parent_id IS NOT NULL
    UNION SELECT id FROM {DEVICE} WHERE parent_id = NEW.device_id"""
# Timestamps are stored as UTC text of one format, so text comparison orders them.
_OVERLAP = f"""NEW.holds AND EXISTS (
    SELECT 1 FROM {TABLE} AS r
    WHERE r.device_id IN ({_SHARING}) AND r.holds AND r.id IS NOT NEW.id
      AND r."start" < NEW."end" AND NEW."start" < r."end")"""
_BOARD_OF_NEW = f"(SELECT COALESCE(parent_id, id) FROM {DEVICE} WHERE id = NEW.device_id)"
SQLITE_UP = [
    f"""UPDATE {TABLE} SET board_id =
        (SELECT COALESCE(parent_id, id) FROM {DEVICE} AS d WHERE d.id = {TABLE}.device_id)""",
    f"DROP TRIGGER {NAME}_insert",
    f"DROP TRIGGER {NAME}_update",
    f"""CREATE TRIGGER {NAME}_insert BEFORE INSERT ON {TABLE} WHEN {_OVERLAP}
        BEGIN SELECT RAISE(ABORT, '{NAME}'); END""",
    f"""CREATE TRIGGER {NAME}_update BEFORE UPDATE ON {TABLE} WHEN {_OVERLAP}
        BEGIN SELECT RAISE(ABORT, '{NAME}'); END""",
    f"""CREATE TRIGGER {BOARD}_insert AFTER INSERT ON {TABLE}
        BEGIN UPDATE {TABLE} SET board_id = {_BOARD_OF_NEW} WHERE id = NEW.id; END""",
    f"""CREATE TRIGGER {BOARD}_update AFTER UPDATE ON {TABLE}
        WHEN NEW.board_id IS NOT {_BOARD_OF_NEW}
        BEGIN UPDATE {TABLE} SET board_id = {_BOARD_OF_NEW} WHERE id = NEW.id; END""",
]
_OLD_OVERLAP = f"""NEW.holds AND EXISTS (
    SELECT 1 FROM {TABLE} AS r
    WHERE r.device_id = NEW.device_id AND r.holds AND r.id IS NOT NEW.id
      AND r."start" < NEW."end" AND NEW."start" < r."end")"""
SQLITE_DOWN = [
    f"DROP TRIGGER {BOARD}_insert",
    f"DROP TRIGGER {BOARD}_update",
    f"DROP TRIGGER {NAME}_insert",
    f"DROP TRIGGER {NAME}_update",
]
# Run last when going back: removing the board column makes SQLite rebuild the table, which
# drops its triggers, so the old guard is put back after that.
SQLITE_DOWN_GUARD = [
    f"""CREATE TRIGGER {NAME}_insert BEFORE INSERT ON {TABLE} WHEN {_OLD_OVERLAP}
        BEGIN SELECT RAISE(ABORT, '{NAME}'); END""",
    f"""CREATE TRIGGER {NAME}_update BEFORE UPDATE ON {TABLE} WHEN {_OLD_OVERLAP}
        BEGIN SELECT RAISE(ABORT, '{NAME}'); END""",
]


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
    dependencies = [
        ("monitoring", "0009_device_mig_slices"),
        ("reservations", "0006_notices_through_notifications"),
    ]

    operations = [
        migrations.RunPython(
            migrations.RunPython.noop,
            _run({"postgresql": [], "sqlite": SQLITE_DOWN_GUARD}),
        ),
        migrations.AddField(
            model_name="reserveddevice",
            name="board",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="monitoring.device",
            ),
        ),
        migrations.AlterField(
            model_name="reservation",
            name="devices",
            field=models.ManyToManyField(
                related_name="reservations",
                through="reservations.ReservedDevice",
                through_fields=("reservation", "device"),
                to="monitoring.device",
            ),
        ),
        migrations.RunPython(
            _run({"postgresql": POSTGRES_UP, "sqlite": SQLITE_UP}),
            _run({"postgresql": POSTGRES_DOWN, "sqlite": SQLITE_DOWN}),
        ),
    ]
