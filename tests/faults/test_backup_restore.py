"""deploy/backup.sh and deploy/restore.sh bring back the database and the data directory's
secrets, on SQLite (sqlite3 .backup) and on PostgreSQL (pg_dump / pg_restore)."""

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from django.db import connection

from tests.realparts import require

ROOT = Path(__file__).resolve().parents[2]


def script(name, *args, **env):
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "HIVE_DATA_DIR")}
    return subprocess.run(
        [str(ROOT / "deploy" / name), *map(str, args)],
        env={**clean, "HIVE_ENV_FILE": "/nonexistent", **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.fixture
def data_dir(tmp_path):
    data = tmp_path / "data"
    (data / "ssh").mkdir(parents=True)
    (data / "ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (data / "secret_key").write_text("s3cret\n")
    return data


def test_sqlite_backup_and_restore_bring_everything_back(tmp_path, data_dir):
    require(shutil.which("sqlite3") is not None, "the sqlite3 command-line tool is missing")
    db = sqlite3.connect(data_dir / "hive.sqlite3")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE booking (id INTEGER PRIMARY KEY, title TEXT)")
    db.execute("INSERT INTO booking (title) VALUES ('kept')")
    db.commit()  # the connection stays open, as the running service's does
    backup = Path(script("backup.sh", tmp_path / "backups", HIVE_DATA_DIR=data_dir))
    assert oct((backup / "hive.sqlite3").stat().st_mode & 0o777) == "0o600"

    db.execute("DELETE FROM booking")
    db.commit()
    db.close()
    shutil.rmtree(data_dir / "ssh")
    script("restore.sh", backup, HIVE_DATA_DIR=data_dir)
    restored = sqlite3.connect(data_dir / "hive.sqlite3")
    assert restored.execute("SELECT title FROM booking").fetchall() == [("kept",)]
    assert (data_dir / "ssh" / "id_ed25519").read_text() == "PRIVATE KEY\n"


def test_postgresql_backup_and_restore_bring_everything_back(tmp_path, data_dir):
    if connection.vendor != "postgresql" or not shutil.which("pg_dump"):
        pytest.skip("needs PostgreSQL and its client tools (CI's second run has them)")
    db = connection.settings_dict
    server = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}"
    url = f"{server}/hive_backup_{os.getpid()}"
    psql = ["psql", f"{server}/postgres", "-qc"]
    subprocess.run([*psql, f"CREATE DATABASE hive_backup_{os.getpid()}"], check=True)
    try:
        subprocess.run(
            [
                "psql",
                url,
                "-qc",
                "CREATE TABLE booking (title text);INSERT INTO booking VALUES ('kept')",
            ],
            check=True,
        )
        backup = script("backup.sh", tmp_path / "b", HIVE_DATA_DIR=data_dir, DATABASE_URL=url)
        subprocess.run(["psql", url, "-qc", "DELETE FROM booking"], check=True)
        script("restore.sh", backup, HIVE_DATA_DIR=data_dir, DATABASE_URL=url)
        rows = subprocess.run(
            ["psql", url, "-tAc", "SELECT title FROM booking"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert rows == ["kept"]
    finally:
        subprocess.run([*psql, f"DROP DATABASE hive_backup_{os.getpid()}"], check=True)
