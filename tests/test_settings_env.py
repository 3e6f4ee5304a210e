"""The environment the settings read: strict parsing, the shipped defaults, the reference.

Each variable is declared once in hiveproject/settings.py through core/env.py; a
value that does not parse stops the start with one clear error, and docs/settings.md is
generated from the same declarations."""

import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.env import BadEnvironment, Env
from hiveproject import settings as hive_settings

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "settings.md"
DECLARED = set(hive_settings.env.variables)


def clean_env(data_dir: Path, **env: str) -> dict[str, str]:
    """This process's environment without any declared variable, plus ``env``."""
    kept = {k: v for k, v in os.environ.items() if k not in DECLARED}
    return {
        **kept,
        "DJANGO_SETTINGS_MODULE": "hiveproject.settings",
        **env,
        "HIVE_DATA_DIR": str(data_dir),
    }


def run(argv: list[str], data_dir: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv],
        env=clean_env(data_dir, **env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def settings_of(data_dir: Path, names: list[str], **env: str) -> dict[str, str]:
    """repr() of each named setting, as a fresh process with ``env`` reads them."""
    code = "import django; django.setup(); from django.conf import settings as s\n"
    code += "".join(f"print(repr(s.{name}))\n" for name in names)
    done = run(["-c", code], data_dir, **env)
    assert done.returncode == 0, done.stderr
    return dict(zip(names, done.stdout.splitlines(), strict=True))


# --- Bad values stop the start -------------------------------------------------------------

# One bad value of each kind: the variable, the value, and what `manage.py check` says it
# expected.
BAD = [
    ("DEBUG", "ture", "1/0, true/false, yes/no, on/off"),
    ("Q_WORKERS", "three", "a whole number, at least 1"),
    ("JOBS_MAX_TASKS", "-5", "a whole number, at least 1"),
    ("SECURE_HSTS_SECONDS", "1.5", "a whole number, at least 0"),
    ("SSH_CONNECT_TIMEOUT", "0", "a number, above 0"),
    ("SSH_MAX_BACKOFF", "nan", "a number, at least 0"),
    ("RESERVATION_IDLE_UTILIZATION", "150", "a number from 0 to 100"),
    ("EMAIL_PORT", "70000", "a whole number from 1 to 65535"),
    ("PROTECTION_LEVEL", "strikt", "one of off, reserved, strict"),
    ("PUBLIC_URL", "gpus.lab.example.org", "a URL with a host: http://…, https://…"),
    ("SITE_TIME_ZONE", "Mars/Olympus", "a time zone name, e.g. Europe/Warsaw"),
    ("TOKEN_THROTTLE_RATE", "lots", "N/second, N/minute, N/hour or N/day"),
    ("VIOLATION_HANDLERS", '[{"handler": ', "a JSON list, or a comma-separated list"),
]
BAD_DATABASE_URL = "mysql://hive:s3cret@db/hive"


def test_bad_values_of_every_kind_stop_manage_py_with_one_clear_error(tmp_path):
    bad = {name: value for name, value, _ in BAD}
    done = run(["manage.py", "check"], tmp_path, **bad, DATABASE_URL=BAD_DATABASE_URL)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("The service cannot start: these settings have values")
    said = sorted(line.strip() for line in done.stderr.splitlines()[1:])
    expected = [
        f"{name}={value!r} (from the environment): expected {what}" for name, value, what in BAD
    ]
    # The password in the URL stays out of the console (and the journal).
    expected.append(
        "DATABASE_URL='mysql://hive:***@db/hive' (from the environment): "
        "expected a URL: postgres://…, postgresql://…, pgsql://…, sqlite://…"
    )
    assert said == sorted(expected)
    assert "s3cret" not in done.stderr
    # Stopped before anything was written: no secret key, no database file.
    assert list(tmp_path.iterdir()) == []


def test_a_bad_value_in_hive_env_is_named_with_the_file(tmp_path):
    env_file = tmp_path / "hive.env"
    env_file.write_text(
        "# written by init\nPUBLIC_URL=https://gpus.lab.example.org\nQ_RETRY=soon\n"
    )
    done = run(["manage.py", "check"], tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"Q_RETRY='soon' (from {env_file}): expected a whole number, at least 1" in done.stderr
    # The environment wins over the file: a good value there, and the start goes on.
    assert run(["manage.py", "check"], tmp_path, Q_RETRY="30").returncode == 0


@pytest.mark.parametrize(
    "declare, raw",
    [
        (lambda env: env.boolean("X", False, ""), "ture"),
        (lambda env: env.boolean("X", False, ""), "2"),
        (lambda env: env.integer("X", 1, ""), "1e3"),
        (lambda env: env.integer("X", 1, ""), "-1"),
        (lambda env: env.integer("X", 1, "", min=1), "0"),
        (lambda env: env.number("X", 1.0, ""), "inf"),
        (lambda env: env.number("X", 1.0, "", positive=True), "0"),
        (lambda env: env.number("X", 1.0, "", max=100), "100.5"),
        (lambda env: env.choice("X", "a", "", ("a", "b")), "c"),
        (lambda env: env.url("X", "", "", schemes=("redis",)), "http://cache"),
        (lambda env: env.url("X", "", "", schemes=("redis",)), "redis://cache:port"),
        (lambda env: env.url("X", "", "", schemes=("https",), host=True), "https:///gpus"),
        (lambda env: env.timezone("X", "UTC", ""), "../etc/passwd"),
        (lambda env: env.text("X", "1/s", "", pattern=r"\d+/s", accepts="N/s"), "x/s"),
        (lambda env: env.json_or_csv("X", [], ""), '{"handler": "a.b"}'),
    ],
)
def test_each_kind_refuses_what_it_cannot_use(declare, raw):
    """Alone, each bad value is enough to stop the start; the default stands meanwhile."""
    env = Env({"X": raw})
    declare(env)
    assert len(env.errors) == 1 and f"X={raw!r} (from the environment)" in env.errors[0]
    with pytest.raises(BadEnvironment, match="cannot start"):
        env.check()


def test_sign_in_with_the_directory_set_up_wrong_stops_the_start(tmp_path):
    """A bad value in the sign-in section, a secret given twice or in a file that is not
    there, and a feature turned on without what it needs: one error names them all, and
    neither secret is shown."""
    data_dir, secrets = tmp_path / "data", tmp_path / "secrets"
    data_dir.mkdir()
    secrets.mkdir()
    (secrets / "oidc").write_text("from-the-file\n")
    done = run(
        ["manage.py", "check"],
        data_dir,
        HIVE_LDAP_SERVER_URI="ldaps://ldap.lab.example.org",
        HIVE_LDAP_GROUP_TYPE="posix",
        HIVE_LDAP_BIND_PASSWORD_FILE=str(secrets / "missing"),
        HIVE_OIDC_CLIENT_ID="gpuhive",
        HIVE_OIDC_CLIENT_SECRET="s3cret-given",
        HIVE_OIDC_CLIENT_SECRET_FILE=str(secrets / "oidc"),
        HIVE_OIDC_TOKEN_ENDPOINT="https://login.lab.example.org/token",
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    said = [line.strip() for line in done.stderr.splitlines()[1:]]
    # A long value is shortened in the message (the test's folder may be long): its ends count.
    missing = said.pop(0)
    assert missing.startswith(f"HIVE_LDAP_BIND_PASSWORD_FILE='{secrets}"[:40]), missing
    assert missing.endswith(
        "' (from the environment): expected a file the service can read (No such file or directory)"
    ), missing
    assert said == [
        "HIVE_LDAP_GROUP_TYPE='posix' (from the environment): expected one of posixGroup, "
        "groupOfNames, nestedGroupOfNames, groupOfUniqueNames, activeDirectory",
        "HIVE_LDAP_SERVER_URI is set: set HIVE_LDAP_USER_SEARCH_BASE (search) or "
        "HIVE_LDAP_USER_DN_TEMPLATE (direct bind) too",
        "HIVE_OIDC_CLIENT_SECRET and HIVE_OIDC_CLIENT_SECRET_FILE are both set: set one of them",
        "HIVE_OIDC_CLIENT_ID is set: set HIVE_OIDC_AUTHORIZATION_ENDPOINT, "
        "HIVE_OIDC_USERINFO_ENDPOINT, HIVE_OIDC_JWKS_ENDPOINT too (manage.py oidc_discover "
        "ISSUER prints them)",
    ]
    assert "s3cret" not in done.stderr and "from-the-file" not in done.stderr
    assert list(data_dir.iterdir()) == []


def test_a_secret_comes_from_its_variable_or_from_the_file_its_file_variable_names(tmp_path):
    (tmp_path / "password").write_text("pw from the file\n\n")
    env = Env({"A_PASSWORD": "given", "B_PASSWORD_FILE": str(tmp_path / "password")})
    assert env.secret("A_PASSWORD", "") == "given"
    assert env.secret("B_PASSWORD", "") == "pw from the file"
    assert env.secret("C_PASSWORD", "") == ""
    assert env.errors == []
    assert {"A_PASSWORD", "A_PASSWORD_FILE", "C_PASSWORD_FILE"} <= set(env.variables)


# --- Good values parse ---------------------------------------------------------------------


def test_good_values_of_every_kind_parse():
    env = Env(
        {
            "ON": " Yes ",
            "OFF": "0",
            "COUNT": "+7",
            "NEGATIVE": "-10",
            "SECONDS": "2.5",
            "LEVEL": "Strict",
            "DB": "postgres://hive:pw@db.example.org:5432/hive",
            "ZONE": "Europe/Warsaw",
            "RATE": "10/hour",
            "LIST": " a, b ,,c ",
            "JSON": '[{"handler": "a.b", "options": {"x": 1}}]',
            "HANDLERS": "a.b, c.d",
            "PATH": "/srv/mail",
            "EMPTY_TEXT": "",
            "EMPTY_NUMBER": " ",
        }
    )
    assert env.boolean("ON", False, "") is True and env.boolean("OFF", True, "") is False
    assert env.integer("COUNT", 1, "", min=1) == 7
    assert env.integer("NEGATIVE", 0, "", min=None) == -10
    assert env.number("SECONDS", 1.0, "", positive=True) == 2.5
    assert env.choice("LEVEL", "off", "", ("off", "reserved", "strict")) == "strict"
    assert (
        env.url("DB", "", "", schemes=("postgres",))
        == "postgres://hive:pw@db.example.org:5432/hive"
    )
    assert env.timezone("ZONE", "UTC", "") == "Europe/Warsaw"
    assert env.text("RATE", "1/s", "", pattern=r"\d+/(s|hour)", accepts="N/s") == "10/hour"
    assert env.csv("LIST", "x", "") == ["a", "b", "c"]
    assert env.json_or_csv("JSON", [], "") == [{"handler": "a.b", "options": {"x": 1}}]
    assert env.json_or_csv("HANDLERS", ["z"], "") == ["a.b", "c.d"]
    assert env.path("PATH", Path("/x"), "") == Path("/srv/mail")
    # Empty: the empty text, but the default for a number.
    assert env.text("EMPTY_TEXT", "default", "") == ""
    assert env.number("EMPTY_NUMBER", 4, "") == 4
    # Unset: the default, exactly as declared (an int stays an int).
    assert env.number("UNSET", 10, "") == 10 and isinstance(env.number("UNSET2", 10, ""), int)
    assert env.errors == []
    env.check()


def test_the_environment_wins_over_the_file_and_the_file_over_the_default(tmp_path):
    (tmp_path / "hive.env").write_text("# comment\nA=from-file\n B = spaced \nC=file\nnot a line\n")
    env = Env({"C": "from-env"})
    env.load_file(tmp_path / "hive.env")
    assert env.text("A", "", "") == "from-file"
    assert env.text("B", "", "") == "spaced"
    assert env.text("C", "", "") == "from-env"
    assert env.text("D", "default", "") == "default"


def test_a_variable_is_declared_once():
    env = Env({})
    env.integer("Q_WORKERS", 3, "")
    with pytest.raises(ValueError, match="Q_WORKERS is declared twice"):
        env.integer("Q_WORKERS", 3, "")


def test_good_values_reach_the_settings(tmp_path):
    values = settings_of(
        tmp_path,
        [
            "DEBUG",
            "Q_CLUSTER['workers']",
            "PROTECTION_LEVEL",
            "LOGGING['root']['level']",
            "Q_LOG_LEVEL",
            "FAIRUSE_IDLE_ACTION",
            "RESERVATION_IDLE_UTILIZATION",
            "TIME_ZONE",
            "VIOLATION_HANDLERS",
            "REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']",
        ],
        DEBUG="on",
        Q_WORKERS="5",
        PROTECTION_LEVEL="STRICT",
        LOG_LEVEL="warning",
        Q_LOG_LEVEL="info",
        FAIRUSE_IDLE_ACTION="Release",
        RESERVATION_IDLE_UTILIZATION="12.5",
        SITE_TIME_ZONE="Asia/Tokyo",
        VIOLATION_HANDLERS='["protection.handlers.kill.KillHandler"]',
        TOKEN_THROTTLE_RATE="5/second",
    )
    assert values == {
        "DEBUG": "True",
        "Q_CLUSTER['workers']": "5",
        "PROTECTION_LEVEL": "'strict'",
        "LOGGING['root']['level']": "'WARNING'",
        "Q_LOG_LEVEL": "'INFO'",
        "FAIRUSE_IDLE_ACTION": "'release'",
        "RESERVATION_IDLE_UTILIZATION": "12.5",
        "TIME_ZONE": "'Asia/Tokyo'",
        "VIOLATION_HANDLERS": "['protection.handlers.kill.KillHandler']",
        "REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']": "{'tokens': '5/second'}",
    }


# --- The defaults as shipped ---------------------------------------------------------------

# What the settings gave before the declarative rewrite, in a clean environment: a value of
# every kind from every section, and every default computed from another setting.
SHIPPED = {
    "DEBUG": "False",
    "ALLOWED_HOSTS": "['localhost', '127.0.0.1', '[::1]']",
    "PUBLIC_URL": "'http://localhost:8000'",
    "CSRF_TRUSTED_ORIGINS": "['http://localhost:8000']",
    "HIVE_URL_PREFIX": "''",
    "FORCE_SCRIPT_NAME": "None",
    "STATIC_URL": "'/static/'",
    "HIVE_SECURE": "False",
    "SECURE_SSL_REDIRECT": "False",
    "SECURE_HSTS_SECONDS": "0",
    "NUM_PROXIES": "0",
    "TIME_ZONE": "'UTC'",
    "DATABASES['default']['ENGINE']": "'core.sqlite3'",
    "Q_CLUSTER": (
        "{'name': 'hive', 'workers': 3, 'timeout': 120, 'retry': 180, 'max_attempts': 3, "
        "'catch_up': False, 'save_limit': 500, 'label': 'Background tasks', "
        "'log_level': 'WARNING', 'orm': 'default'}"
    ),
    "CACHES['default']['BACKEND']": "'django.core.cache.backends.db.DatabaseCache'",
    "CHANNEL_LAYERS['default']['BACKEND']": "'channels.layers.InMemoryChannelLayer'",
    "LOGGING['root']['level']": "'INFO'",
    "REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']": "{'tokens': '30/minute'}",
    "REST_FRAMEWORK['NUM_PROXIES']": "0",
    "DATA_UPLOAD_MAX_MEMORY_SIZE": "2097152",
    "REQUEST_READ_TIMEOUT": "60.0",
    "LOGIN_ATTEMPTS": "5",
    "MONITORING_INTERVAL": "2.0",
    "MONITORING_LEASE_SECONDS": "10.0",
    "MONITORING_LOOP_SECONDS": "100",
    "MONITORING_RAW_RETENTION_HOURS": "24",
    "MONITORING_PROBE_SESSIONS": "True",
    "MONITORING_DISK_PATHS": "['/', '/home']",
    "WORKERS_STALL_SECONDS": "30.0",
    "WORKER_ANSWER_SECONDS": "20.0",
    "DATABASE_LOCK_WAIT": "30",
    "JOBS_START_TIMEOUT": "150",
    "JOBS_LOG_KEEP_BYTES": "1048576",
    "QUEUE_PREEMPT_LEAD_SECONDS": "90",
    "QUEUE_DEFAULT_MAX_PRIORITY": "0",
    "QUEUE_FAIRSHARE_HALF_LIFE_HOURS": "168.0",
    "FAIRUSE_IDLE_ACTION": "'off'",
    "RESERVATION_MAX_DAYS": "8",
    "PROTECTION_LEVEL": "'reserved'",
    "PROTECTION_ALLOWED_USERS": "[]",
    "VIOLATION_HANDLERS": (
        "['protection.handlers.terminal.write_to_terminals', "
        "'protection.handlers.email.EmailHandler', 'protection.handlers.notify.NotifyHandler']"
    ),
    "NOTIFY_SEND_TIMEOUT": "5.0",
    "EMAIL_BACKEND": "'django.core.mail.backends.filebased.EmailBackend'",
    "EMAIL_HOST": "'localhost'",
    "EMAIL_PORT": "25",
    "DEFAULT_FROM_EMAIL": "'gpuhive@localhost'",
}


def test_the_shipped_defaults_give_the_values_they_always_gave(tmp_path):
    assert settings_of(tmp_path, list(SHIPPED)) == SHIPPED
    (email_file_path,) = settings_of(tmp_path, ["EMAIL_FILE_PATH"]).values()
    assert email_file_path == repr(tmp_path.resolve() / "mail")


def test_defaults_computed_from_other_settings_follow_them(tmp_path):
    values = settings_of(
        tmp_path,
        [
            "CSRF_TRUSTED_ORIGINS",
            "HIVE_URL_PREFIX",
            "SESSION_COOKIE_PATH",
            "SECURE_HSTS_SECONDS",
            "SESSION_COOKIE_SECURE",
            "NUM_PROXIES",
            "SECURE_PROXY_SSL_HEADER",
            "EMAIL_BACKEND",
            "MONITORING_LEASE_SECONDS",
            "WORKERS_STALL_SECONDS",
            "MONITORING_LOOP_SECONDS",
            "JOBS_START_TIMEOUT",
            "QUEUE_PREEMPT_LEAD_SECONDS",
            "WORKER_ANSWER_SECONDS",
        ],
        PUBLIC_URL="https://lab.example.org/gpus/",
        HIVE_BEHIND_PROXY="1",
        EMAIL_HOST="smtp.lab.example.org",
        MONITORING_INTERVAL="4",
        Q_TIMEOUT="60",
        Q_RETRY="100",
        JOBS_STOP_GRACE_SECONDS="10",
        SSH_CONNECT_TIMEOUT="1",
    )
    assert values == {
        "CSRF_TRUSTED_ORIGINS": "['https://lab.example.org']",
        "HIVE_URL_PREFIX": "'/gpus'",
        "SESSION_COOKIE_PATH": "'/gpus'",
        "SECURE_HSTS_SECONDS": "31536000",
        "SESSION_COOKIE_SECURE": "True",
        "NUM_PROXIES": "1",
        "SECURE_PROXY_SSL_HEADER": "('HTTP_X_FORWARDED_PROTO', 'https')",
        "EMAIL_BACKEND": "'django.core.mail.backends.smtp.EmailBackend'",
        "MONITORING_LEASE_SECONDS": "20.0",
        "WORKERS_STALL_SECONDS": "60.0",
        "MONITORING_LOOP_SECONDS": "40",
        "JOBS_START_TIMEOUT": "90",
        "QUEUE_PREEMPT_LEAD_SECONDS": "70",
        "WORKER_ANSWER_SECONDS": "12.0",
    }


# --- The reference -------------------------------------------------------------------------


def reference(data_dir: Path, **env: str) -> str:
    done = run(["-m", "hiveproject.settings_reference"], data_dir, **env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_committed_settings_reference_matches_the_declarations(tmp_path):
    new, old = reference(tmp_path), REFERENCE.read_text()
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), n=1))
    assert new == old, (
        "docs/settings.md is not what the declarations give: run bin/settings-reference and "
        "commit it.\n" + diff[:4000]
    )


def test_the_reference_does_not_depend_on_the_environment_it_is_written_in(tmp_path):
    """A default computed from another setting needs its words (``shown=``): without them
    the reference would show the value of the machine that wrote it."""
    assert (
        reference(
            tmp_path,
            PUBLIC_URL="https://lab.example.org/gpus",
            HIVE_BEHIND_PROXY="1",
            DEBUG="1",
            EMAIL_HOST="smtp.lab.example.org",
            MONITORING_INTERVAL="7",
            Q_TIMEOUT="50",
            Q_RETRY="70",
            SSH_CONNECT_TIMEOUT="1",
            JOBS_STOP_GRACE_SECONDS="5",
            REDIS_URL="redis://cache:6379/3",
        )
        == REFERENCE.read_text()
    )
