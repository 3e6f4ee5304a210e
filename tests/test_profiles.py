"""Settings and the two profiles: embedded (SQLite) and production (PostgreSQL + Redis)."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = bool(os.environ.get("DATABASE_URL"))


def settings_in_subprocess(data_dir: Path, *names: str, **env) -> list[str]:
    code = "from django.conf import settings as s; " + "; ".join(
        f"print(repr(s.{name}))" for name in names
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "hiveproject.settings",
            "HIVE_DATA_DIR": str(data_dir),
            **env,
        },
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


def test_it_generates_and_keeps_a_secret_key_in_the_data_dir(tmp_path):
    first = settings_in_subprocess(tmp_path, "SECRET_KEY")
    second = settings_in_subprocess(tmp_path, "SECRET_KEY")
    assert first == second and len(first[0]) > 40
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    other = settings_in_subprocess(tmp_path / "other", "SECRET_KEY")
    assert other != first


def test_the_embedded_profile_is_sqlite_in_wal_mode_with_debug_off(tmp_path):
    engine, options, debug, broker = settings_in_subprocess(
        tmp_path,
        "DATABASES['default']['ENGINE']",
        "DATABASES['default']['OPTIONS']",
        "DEBUG",
        "Q_CLUSTER.get('orm')",
    )
    assert "sqlite3" in engine and "IMMEDIATE" in options and "WAL" in options
    assert debug == "False" and broker == "'default'"


def test_the_environment_selects_the_production_profile(tmp_path):
    engine, broker, layer = settings_in_subprocess(
        tmp_path,
        "DATABASES['default']['ENGINE']",
        "Q_CLUSTER.get('redis')",
        "CHANNEL_LAYERS['default']['BACKEND']",
        DATABASE_URL="postgres://u@db.example.org/hive",
        REDIS_URL="redis://cache:6379/0",
    )
    assert "postgresql" in engine and broker == "'redis://cache:6379/0'"
    assert "RedisChannelLayer" in layer


def test_the_env_file_in_the_data_dir_is_read_and_the_environment_wins(tmp_path):
    (tmp_path / "hive.env").write_text("# set by init\nPUBLIC_URL=https://a.example\nDEBUG=1\n")
    assert settings_in_subprocess(tmp_path, "PUBLIC_URL", "DEBUG") == [
        "'https://a.example'",
        "True",
    ]
    assert settings_in_subprocess(tmp_path, "DEBUG", DEBUG="0") == ["False"]


@pytest.mark.skipif(not PRODUCTION, reason="DATABASE_URL not set (CI sets it)")
@pytest.mark.django_db
def test_it_runs_on_postgresql_in_the_production_profile():
    assert connection.vendor == "postgresql"


@pytest.mark.skipif(not settings.REDIS_URL, reason="REDIS_URL not set (CI sets it)")
def test_the_channel_layer_and_the_task_broker_use_redis():
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.send)(channel, {"type": "probe.done", "host": "node-1"})
    assert async_to_sync(layer.receive)(channel) == {"type": "probe.done", "host": "node-1"}
    from django_q.brokers import get_broker

    assert get_broker().ping()


def test_production_hashes_passwords_with_pbkdf2_at_full_cost(tmp_path, production_hashers):
    """Only the tests' settings make hashing cheap; the service keeps Django's default."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher, identify_hasher, make_password

    (hashers,) = settings_in_subprocess(tmp_path, "PASSWORD_HASHERS")
    assert hashers.startswith("['django.contrib.auth.hashers.PBKDF2PasswordHasher'")
    encoded = make_password("pw")
    assert identify_hasher(encoded).algorithm == "pbkdf2_sha256"
    assert encoded.split("$")[1] == str(PBKDF2PasswordHasher.iterations)
