"""Settings for the GPU service, read from the environment.

Every setting has a default that runs the embedded profile (SQLite under HIVE_DATA_DIR,
the django-q2 ORM broker, an in-memory channel layer). Setting DATABASE_URL and REDIS_URL
switches to the production profile. Values may also come from ``HIVE_DATA_DIR/hive.env``
(written by ``manage.py init``); the process environment always wins over that file.
"""

import os
import secrets
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def _read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines; blank lines and # comments ignored."""
    values = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                values[key.strip()] = value.strip()
    return values


HIVE_DATA_DIR = Path(os.environ.get("HIVE_DATA_DIR", BASE_DIR / "data")).resolve()
_FILE_ENV = _read_env_file(HIVE_DATA_DIR / "hive.env")


def envstr(name: str, default: str = "") -> str:
    return os.environ.get(name, _FILE_ENV.get(name, default))


def envbool(name: str, default: bool) -> bool:
    value = envstr(name, "")
    if not value:
        return default
    return value.lower() in ("1", "true", "yes", "on")


def envint(name: str, default: int) -> int:
    value = envstr(name, "")
    return int(value) if value else default


def envfloat(name: str, default: float) -> float:
    value = envstr(name, "")
    return float(value) if value else default


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in envstr(name, default).split(",") if item.strip()]


def _persisted_secret_key() -> str:
    """SECRET_KEY from the environment, else generated once and kept in the data dir."""
    if envstr("SECRET_KEY"):
        return envstr("SECRET_KEY")
    path = HIVE_DATA_DIR / "secret_key"
    if not path.exists():
        HIVE_DATA_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _persisted_secret_key()
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
PUBLIC_URL = envstr("PUBLIC_URL", "http://localhost:8000")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", PUBLIC_URL)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "guardian",
    "django_q",
    "channels",
    "monitoring",
    "accesscontrol",
    "reservations",
    "jobs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "hiveproject.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accesscontrol.context_processors.motd",
            ],
        },
    },
]

WSGI_APPLICATION = "hiveproject.wsgi.application"
ASGI_APPLICATION = "hiveproject.asgi.application"

DATABASE_URL = envstr("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": HIVE_DATA_DIR / "hive.sqlite3",
            "OPTIONS": {
                # IMMEDIATE takes the write lock at BEGIN, so concurrent writers queue on
                # busy_timeout instead of failing with "database is locked" mid-transaction.
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            # A file, not the in-memory default: tests run workers in threads and processes
            # against it, as production does (WAL, busy timeout, IMMEDIATE transactions).
            "TEST": {"NAME": str(HIVE_DATA_DIR / "test.sqlite3")},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = envstr("REDIS_URL")
Q_CLUSTER = {
    "name": "hive",
    # One worker is held by the probing loop; the others run protection, queue and tasks.
    "workers": envint("Q_WORKERS", 3),
    "timeout": envint("Q_TIMEOUT", 120),
    "retry": envint("Q_RETRY", 180),
    "max_attempts": 3,
    "catch_up": False,
    "save_limit": 500,
    "label": "Background tasks",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    Q_CLUSTER["orm"] = "default"
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
# Stored in UTC; shown in the site's zone. Weekly access windows are evaluated in it too.
SITE_TIME_ZONE = envstr("SITE_TIME_ZONE", "UTC")
TIME_ZONE = SITE_TIME_ZONE
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = HIVE_DATA_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}

EMAIL_BACKEND = envstr("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "gpuhive@localhost")

# --- Monitoring and SSH -------------------------------------------------------------------
MONITORING_INTERVAL = envfloat("MONITORING_INTERVAL", 2.0)
SSH_KEY_PATH = HIVE_DATA_DIR / "ssh" / "id_ed25519"
SSH_CONNECT_TIMEOUT = envfloat("SSH_CONNECT_TIMEOUT", 5.0)
SSH_COMMAND_TIMEOUT = envfloat("SSH_COMMAND_TIMEOUT", 20.0)
SSH_KEEPALIVE = envint("SSH_KEEPALIVE", 15)
# A hung nvidia-smi is killed on the host after this many seconds.
NVIDIA_SMI_TIMEOUT = envfloat("NVIDIA_SMI_TIMEOUT", 10.0)
# Longest pause between reconnect attempts to a host that keeps failing.
SSH_MAX_BACKOFF = envfloat("SSH_MAX_BACKOFF", 60.0)
# /metrics answers only with "Authorization: Bearer <METRICS_TOKEN>" (unset: always 403).
METRICS_TOKEN = envstr("METRICS_TOKEN")
# History: a raw sample per host this often, averaged into minutes and hours, then pruned.
MONITORING_HISTORY_STEP = envfloat("MONITORING_HISTORY_STEP", 10.0)
MONITORING_RAW_RETENTION_HOURS = envfloat("MONITORING_RAW_RETENTION_HOURS", 24)
MONITORING_MINUTE_RETENTION_DAYS = envfloat("MONITORING_MINUTE_RETENTION_DAYS", 30)
MONITORING_HOUR_RETENTION_DAYS = envfloat("MONITORING_HOUR_RETENTION_DAYS", 400)

# --- Access control ----------------------------------------------------------------------
# Let people create an account by proving a UNIX account on a host (off: admins add users).
SELF_SIGNUP = envbool("SELF_SIGNUP", False)

# --- Reservations ------------------------------------------------------------------------
RESERVATION_MIN_MINUTES = envint("RESERVATION_MIN_MINUTES", 30)
RESERVATION_MAX_DAYS = envint("RESERVATION_MAX_DAYS", 8)
RESERVATION_START_GRACE_SECONDS = envint("RESERVATION_START_GRACE_SECONDS", 60)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    # Connection failures are recorded on the host; paramiko's own tracebacks are noise.
    "loggers": {"paramiko": {"level": "CRITICAL"}},
}
