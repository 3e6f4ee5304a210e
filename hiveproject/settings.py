"""Settings for the GPU service, read from the environment.

Every setting has a default that runs the embedded profile (SQLite under HIVE_DATA_DIR,
the django-q2 ORM broker, an in-memory channel layer). Setting DATABASE_URL and REDIS_URL
switches to the production profile. Values may also come from ``HIVE_DATA_DIR/hive.env``
(written by ``manage.py init``); the process environment always wins over that file.
"""

import json
import os
import secrets
import sys
from pathlib import Path
from urllib.parse import urlsplit

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


def envhandlers(name: str, default: list) -> list:
    """A JSON list (entries with options) or plain comma-separated dotted paths."""
    raw = envstr(name).strip()
    if raw.startswith("["):
        return json.loads(raw)
    return envlist(name, "") or default


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

# --- Security, HTTPS and reverse proxies -------------------------------------------------
# Everything follows PUBLIC_URL: https turns the secure profile on, a path (https://lab.org/gpus)
# serves the site under that prefix. Each part can still be set on its own.
_PUBLIC = urlsplit(PUBLIC_URL)
# Browsers send Origin as scheme://host[:port], never with the sub-path.
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", f"{_PUBLIC.scheme}://{_PUBLIC.netloc}")
# The proxy passes the full path (/gpus/...); Django strips the prefix and puts it back into
# every URL it builds. "" when served at the root.
HIVE_URL_PREFIX = "/" + envstr("HIVE_URL_PREFIX", _PUBLIC.path).strip("/")
HIVE_URL_PREFIX = HIVE_URL_PREFIX.rstrip("/")
FORCE_SCRIPT_NAME = HIVE_URL_PREFIX or None
# Cookies stay under the prefix, so other sites on the same host never receive them.
SESSION_COOKIE_PATH = CSRF_COOKIE_PATH = HIVE_URL_PREFIX or "/"
HIVE_SECURE = envbool("HIVE_SECURE", _PUBLIC.scheme == "https")
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", HIVE_SECURE)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", HIVE_SECURE)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", HIVE_SECURE)
# HSTS cannot be taken back for its duration: it is on only when the site is https anyway.
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000 if HIVE_SECURE else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HIVE_SECURE)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", HIVE_SECURE)
# Behind nginx, the proxy says whether the browser used https and which host it asked for.
# Only set this when the proxy overwrites these headers and daphne is not reachable directly.
HIVE_BEHIND_PROXY = envbool("HIVE_BEHIND_PROXY", False)
if HIVE_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = True

# Not "daphne": its app config imports Twisted (about 40 MiB) into every process, workers
# included, only to turn `runserver` into an ASGI server; `manage.py serve` runs daphne itself.
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "django_q",
    "channels",
    "monitoring",
    "accesscontrol",
    "notifications",
    "reservations",
    "jobs",
    "protection",
    "queueing",
    "fairuse",
    "accounting",
    "audit",
    "apitokens",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Body size, JSON depth and NUL refused before any view or the database (issue 20).
    "hiveproject.limits.RequestLimits",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Lets audit entries written by model signals name the signed-in user.
    "audit.context.ActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # A write that found SQLite locked too long: 503 with Retry-After, not a 500 (issue 20).
    "hiveproject.api_errors.BusyDatabase",
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
# The embedded profile's SQLite: Django's, with writers queued in the process
# (hiveproject/sqlite3). IMMEDIATE takes the write lock at BEGIN, so concurrent writers
# queue on busy_timeout instead of failing with "database is locked" mid-transaction.
EMBEDDED_SQLITE = {
    "ENGINE": "hiveproject.sqlite3",
    "OPTIONS": {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    },
}
if DATABASE_URL:
    # A pool per process: under ASGI every request runs in a thread of its own, so without a
    # bound 200 busy users opened more connections than PostgreSQL allows ("too many clients
    # already", bench/load). Requests wait for a pooled connection instead. Health checks
    # make the pool test connections on checkout: ones a database restart cut are replaced.
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_health_checks=True)}
    if DATABASES["default"]["ENGINE"].endswith("postgresql"):
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": envint("DATABASE_POOL_SIZE", 20),
            "timeout": envfloat("DATABASE_POOL_TIMEOUT", 10),
        }
    elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        # A SQLite file named by URL (the tests' service processes, a moved data file) is
        # run as the embedded one is: Django's plain backend would meet other processes'
        # writers with "database is locked".
        DATABASES["default"].update(EMBEDDED_SQLITE)
else:
    DATABASES = {
        "default": {
            **EMBEDDED_SQLITE,
            "NAME": HIVE_DATA_DIR / "hive.sqlite3",
            # A file, not the in-memory default: tests run workers in threads and processes
            # against it, as production does (WAL, busy timeout, IMMEDIATE transactions).
            "TEST": {"NAME": str(HIVE_DATA_DIR / "test.sqlite3")},
        }
    }

if not DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # DRF imports django.contrib.postgres's fields wherever it can (rest_framework.compat),
    # and they import psycopg with the libpq and OpenSSL it bundles: 9 MiB more in the web
    # process, for a database this one does not use. Marked missing, the import fails as DRF
    # expects where psycopg is not installed.
    sys.modules.setdefault("django.contrib.postgres.fields", None)

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
    # First: refuses password checks for a name and address after repeated failures.
    "apitokens.signin.SignInLimit",
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

STATIC_URL = f"{HIVE_URL_PREFIX}/static/"
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
        "apitokens.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # drf-spectacular's, documenting the error answers of every operation.
    "DEFAULT_SCHEMA_CLASS": "hiveproject.api_schema.HiveAutoSchema",
    # One error shape everywhere: {"detail": message, <field>: [messages]...}.
    "EXCEPTION_HANDLER": "hiveproject.api_errors.exception_handler",
    # Only views that name a throttle scope are limited (token endpoints); see apitokens.
    "DEFAULT_THROTTLE_RATES": {"tokens": envstr("TOKEN_THROTTLE_RATE", "30/minute")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Hive API",
    "DESCRIPTION": "Monitoring, access, reservations and jobs of a lab's shared GPU servers.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from our own static files (drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Status enums that several components share keep one name each.
    "ENUM_NAME_OVERRIDES": {
        "TaskStatusEnum": "jobs.models.Task.Status",
        "ReservationStatusEnum": "reservations.models.Reservation.Status",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",  # the default
        "hiveproject.api_schema.empty_means_absent",
    ],
}
# Sign-in attempts per username and address before the login form says "wait".
LOGIN_ATTEMPTS = envint("LOGIN_ATTEMPTS", 5)
LOGIN_ATTEMPT_WINDOW = envint("LOGIN_ATTEMPT_WINDOW", 300)

# Mail goes over SMTP once EMAIL_HOST is set; until then each message is a file under
# EMAIL_FILE_PATH that the admin can open (never the console, where it drowned the problems).
EMAIL_BACKEND = envstr(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if envstr("EMAIL_HOST")
    else "django.core.mail.backends.filebased.EmailBackend",
)
EMAIL_FILE_PATH = Path(envstr("EMAIL_FILE_PATH", str(HIVE_DATA_DIR / "mail")))
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "gpuhive@localhost")
# SMTP (the backend once EMAIL_HOST is set); no user: no login.
EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = envstr("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 10)

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
# Disk usage is measured for these paths on every host (absolute; missing ones are skipped).
MONITORING_DISK_PATHS = envlist("MONITORING_DISK_PATHS", "/,/home")
# How long a silent probing loop keeps its lease: several cycles, so one slow cycle does
# not lose it; it is also the longest a crashed loop's successor waits to take over.
MONITORING_LEASE_SECONDS = envfloat("MONITORING_LEASE_SECONDS", max(5 * MONITORING_INTERVAL, 10.0))
# How long one loop task runs before the next scheduled run takes over: well inside
# django-q2's timeout and retry, which would otherwise cut it short or start it twice.
MONITORING_LOOP_SECONDS = envfloat(
    "MONITORING_LOOP_SECONDS", max(min(Q_CLUSTER["timeout"], Q_CLUSTER["retry"]) - 20, 10)
)
# Most hosts probed at the same moment (a thread each); more hosts wait for the next cycle.
MONITORING_PROBE_THREADS = envint("MONITORING_PROBE_THREADS", 128)

# --- Access control ----------------------------------------------------------------------
# Let people create an account by proving a UNIX account on a host (off: admins add users).
SELF_SIGNUP = envbool("SELF_SIGNUP", False)

# --- Reservations ------------------------------------------------------------------------
RESERVATION_MIN_MINUTES = envint("RESERVATION_MIN_MINUTES", 30)
RESERVATION_MAX_DAYS = envint("RESERVATION_MAX_DAYS", 8)
RESERVATION_START_GRACE_SECONDS = envint("RESERVATION_START_GRACE_SECONDS", 60)
# Mails: reminders this many minutes before a reservation starts and ends; a warning when a
# reserved GPU stayed under RESERVATION_IDLE_UTILIZATION % for RESERVATION_IDLE_MINUTES.
RESERVATION_REMIND_START_MINUTES = envint("RESERVATION_REMIND_START_MINUTES", 30)
RESERVATION_REMIND_END_MINUTES = envint("RESERVATION_REMIND_END_MINUTES", 30)
RESERVATION_IDLE_UTILIZATION = envfloat("RESERVATION_IDLE_UTILIZATION", 5.0)
RESERVATION_IDLE_MINUTES = envint("RESERVATION_IDLE_MINUTES", 60)

# --- Jobs --------------------------------------------------------------------------------
# Where task logs, pid and exit files go on each host ("~/" is the account's home there).
JOBS_LOG_DIR = envstr("JOBS_LOG_DIR", "~/.gpuhive/logs")
# Screen sessions are named PREFIX-<task id>; give each installation sharing hosts its own.
JOBS_SESSION_PREFIX = envstr("JOBS_SESSION_PREFIX", "hive-task")
# A scheduled (or graceful) stop sends SIGTERM, then SIGKILL after this many seconds.
JOBS_STOP_GRACE_SECONDS = envint("JOBS_STOP_GRACE_SECONDS", 30)
# A task still "starting" after this many seconds was left by a starter that died (no worker
# task runs longer); the next sync adopts its screen session or puts it back to pending.
JOBS_START_TIMEOUT = envint("JOBS_START_TIMEOUT", Q_CLUSTER["timeout"] + 30)
# The most log bytes one poll of the live log view returns.
JOBS_LOG_CHUNK_BYTES = envint("JOBS_LOG_CHUNK_BYTES", 65536)

# --- Queue -------------------------------------------------------------------------------
# A queued job does not start on a GPU that someone else has reserved from within this many
# minutes (the owner's own reservations do not count).
QUEUE_RESERVATION_HORIZON = envint("QUEUE_RESERVATION_HORIZON", 30)
# Queue jobs on a GPU someone else reserved are sent SIGTERM this many seconds before the
# reservation starts (SIGKILL follows JOBS_STOP_GRACE_SECONDS later).
QUEUE_PREEMPT_LEAD_SECONDS = envint("QUEUE_PREEMPT_LEAD_SECONDS", JOBS_STOP_GRACE_SECONDS + 60)
# Highest priority for users whose group has no queue quota (admins set quotas per group).
QUEUE_DEFAULT_MAX_PRIORITY = envint("QUEUE_DEFAULT_MAX_PRIORITY", 0)
# A job whose start failed this many times leaves the queue as failed.
QUEUE_MAX_START_FAILURES = envint("QUEUE_MAX_START_FAILURES", 3)
# API tokens have a "state" and distributed jobs a "kind" too: the schema keeps its names
# for theirs and names the queue's.
SPECTACULAR_SETTINGS.setdefault("ENUM_NAME_OVERRIDES", {}).update(
    {
        "QueuedJobStateEnum": "queueing.models.QueuedJob.State",
        "QueuedTaskKindEnum": "queueing.models.QueuedTask.Kind",
        "StateEnum": ["active", "expired", "revoked"],
        "KindEnum": "jobs.distributed.KINDS.items",
    }
)

# --- Protection --------------------------------------------------------------------------
# off | reserved (intruders on reserved GPUs) | strict (also any use without a reservation).
PROTECTION_LEVEL = envstr("PROTECTION_LEVEL", "reserved")
# Extra cycles for a process already running when a reservation begins (the previous user's
# job, just ending) and, at the strict level, on an unreserved GPU; one appearing during a
# reservation is flagged at first sight.
PROTECTION_GRACE_CYCLES = envint("PROTECTION_GRACE_CYCLES", 1)
# Never flagged: every process of these UNIX users, and USER:GLOB command patterns (* = anyone).
PROTECTION_ALLOWED_USERS = envlist("PROTECTION_ALLOWED_USERS", "")
PROTECTION_ALLOWED_COMMANDS = envlist(
    "PROTECTION_ALLOWED_COMMANDS",
    "root:*Xorg*,root:*Xwayland*,gdm:*gnome-shell*,gdm:*Xwayland*,root:*nvidia-persistenced*",
)
# Dotted paths, comma-separated, or a JSON list whose entries are dotted paths or
# {"handler": dotted path, "options": {...}, "repeat_seconds": N}; see protection/handlers/.
# By default the offender reads it on their terminal and in mail, and the booking's owner
# on their own notification channels (mail and chat, as they chose them); every page also
# shows owners the intrusions going on (protection.context_processors).
VIOLATION_HANDLERS = envhandlers(
    "VIOLATION_HANDLERS",
    [
        "protection.handlers.terminal.write_to_terminals",
        "protection.handlers.email.EmailHandler",
        "protection.handlers.notify.NotifyHandler",
    ],
)
TEMPLATES[0]["OPTIONS"]["context_processors"].append("protection.context_processors.intrusions")

# `serve`'s access log, a line per request: "" none (the console keeps to problems and a
# summary), "-" the console, else a file (relative: in HIVE_DATA_DIR). `serve --access-log`.
ACCESS_LOG = envstr("ACCESS_LOG", "")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    # Connection failures are recorded on the host; paramiko's own tracebacks are noise.
    "loggers": {"paramiko": {"level": "CRITICAL"}},
}

# --- Security at the edges (issue 15): run-as accounts, client addresses, shared counters ---
# Jobs never run as an account below this UID (system accounts), nor as root, a host's
# monitoring account or the service's own account, unless an admin records an allowance.
RUN_AS_MIN_UID = envint("RUN_AS_MIN_UID", 1000)
# Proxies in front of daphne whose X-Forwarded-For entry is believed (nginx: 1). The client's
# address is the entry the nearest proxy wrote; with 0 it is the socket's (apitokens.limits).
NUM_PROXIES = envint("NUM_PROXIES", 1 if HIVE_BEHIND_PROXY else 0)
REST_FRAMEWORK["NUM_PROXIES"] = NUM_PROXIES  # DRF's throttles: the same address
# Failed sign-ins from one address whatever the names (spraying), and on the whole site
# (spraying from many addresses). Reaching the site's count brakes, it does not lock: an
# address is then refused after LOGIN_BRAKE_ADDRESS_ATTEMPTS failures of its own, and one
# with fewer (the innocent) still signs in (apitokens.signin).
LOGIN_ADDRESS_ATTEMPTS = envint("LOGIN_ADDRESS_ATTEMPTS", 20)
LOGIN_SITE_ATTEMPTS = envint("LOGIN_SITE_ATTEMPTS", 1000)
LOGIN_BRAKE_ADDRESS_ATTEMPTS = envint("LOGIN_BRAKE_ADDRESS_ATTEMPTS", 3)
# Password-reset mails per recipient and per asking address, per hour.
PASSWORD_RESET_MAILS_PER_RECIPIENT = envint("PASSWORD_RESET_MAILS_PER_RECIPIENT", 3)
PASSWORD_RESET_MAILS_PER_ADDRESS = envint("PASSWORD_RESET_MAILS_PER_ADDRESS", 10)
# Self-sign-up proofs (an SSH login each) per address and per claimed name, per hour.
SIGNUP_ATTEMPTS = envint("SIGNUP_ATTEMPTS", 10)
# Counters every web process shares (sign-in and mail limits, throttles): Redis in
# production, a database table on the embedded profile (created by migrate).
if REDIS_URL:
    _CACHE = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
else:
    _CACHE = {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "hive_cache"}
CACHES = {"default": _CACHE}


# Files the service writes are its own: the data dir 0700 (the secret key and SSH key are
# created 0600 where they are written), the SQLite file 0600 before SQLite creates it 0644
# (its -wal and -shm files take the database file's mode).
def _private_files() -> None:
    HIVE_DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    if HIVE_DATA_DIR.stat().st_uid == os.getuid():
        HIVE_DATA_DIR.chmod(0o700)
    database = DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3") and str(database["NAME"]) != ":memory:":
        os.close(os.open(database["NAME"], os.O_WRONLY | os.O_CREAT, 0o600))
        if os.stat(database["NAME"]).st_uid == os.getuid():
            os.chmod(database["NAME"], 0o600)


_private_files()
# Who sees which GPU processes' command lines (monitoring.visibility): own and, for admins of
# the host, everyone's; others read "command hidden".
PROCESS_VISIBILITY = envstr("PROCESS_VISIBILITY", "accesscontrol.accounts.ProcessVisibility")

# --- Supervised workers (serve-workers) ---------------------------------------------------
# `manage.py workers` (and `serve`) run the django-q2 cluster under a supervisor. A cluster in
# which no task finished for WORKERS_STALL_SECONDS while work was due and a worker was free is
# stalled (e.g. a worker killed as next in line holds the task queue's lock for ever: django-q2
# issue #23): it is killed as a whole and started again, and the reason recorded.
WORKERS_STALL_SECONDS = envfloat("WORKERS_STALL_SECONDS", max(15 * MONITORING_INTERVAL, 30.0))
# Stopping: SIGINT to the cluster's process group, then SIGKILL to what is left after this.
WORKERS_STOP_GRACE_SECONDS = envfloat("WORKERS_STOP_GRACE_SECONDS", 10.0)
# django-q2 logs a line per task at INFO; the supervisor prints one summary a minute instead.
Q_LOG_LEVEL = envstr("Q_LOG_LEVEL", "WARNING").upper()
Q_CLUSTER["log_level"] = Q_LOG_LEVEL
LOGGING["loggers"]["django-q"] = {"level": Q_LOG_LEVEL}
# Monitors and load balancers ask /healthz over plain http on the internal network.
SECURE_REDIRECT_EXEMPT = [r"(^|/)healthz$"]

# --- Scale and speed (issue 18) ------------------------------------------------------------
# Probe SSH hosts through a long-lived probe loop per host (monitoring/sessions.py), asked
# for one sample per cycle; off: a one-shot probe (a new channel and shell) every cycle.
MONITORING_PROBE_SESSIONS = envbool("MONITORING_PROBE_SESSIONS", True)
# API answers written by orjson (same bytes as DRF's JSON renderer), the browsable API kept.
REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"] = [
    "hiveproject.renderers.FastJSONRenderer",
    "rest_framework.renderers.BrowsableAPIRenderer",
]
# HTML and JSON go out compressed to clients that accept it (lists and the board shrink
# 5-10×); outermost, so it compresses what every other middleware wrote. Static files come
# precompressed from whitenoise. CSRF tokens are masked per response, so the compression
# does not leak them (BREACH).
MIDDLEWARE.insert(0, "django.middleware.gzip.GZipMiddleware")

# --- Fair use: idle bookings given back (fairuse/) ---------------------------------------
# The site's idle rule, where no host or group has its own (admin → Fair use → idle
# policies): off | warn | release. A reserved GPU is idle while it shows none of the owner's
# processes and a load under RESERVATION_IDLE_UTILIZATION %; a booking with GPUs idle this
# many minutes is warned, and with "release" its idle GPUs go back GRACE minutes later
# unless the owner keeps it.
FAIRUSE_IDLE_ACTION = envstr("FAIRUSE_IDLE_ACTION", "off")
FAIRUSE_IDLE_MINUTES = envint("FAIRUSE_IDLE_MINUTES", 30)
FAIRUSE_IDLE_GRACE_MINUTES = envint("FAIRUSE_IDLE_GRACE_MINUTES", 15)

# --- Fair use: fair-share in the queue (queueing/fairshare.py) ----------------------------
# GPU-hours from bookings and queue runs count half after this many hours (0: no fair-share);
# the factors are cached this many seconds for pages and the API.
QUEUE_FAIRSHARE_HALF_LIFE_HOURS = envfloat("QUEUE_FAIRSHARE_HALF_LIFE_HOURS", 168.0)
QUEUE_FAIRSHARE_CACHE_SECONDS = envint("QUEUE_FAIRSHARE_CACHE_SECONDS", 60)

# --- Fair use: accounting (accounting/) ---------------------------------------------------
# Grams of CO2e per kWh the GPUs draw (the lab's grid; e.g. 350 for a European average).
ACCOUNTING_EMISSION_G_PER_KWH = envfloat("ACCOUNTING_EMISSION_G_PER_KWH", 350.0)
# /metrics also exports these collectors (dotted paths): per-user usage counters.
METRICS_EXTRA_COLLECTORS = envlist("METRICS_EXTRA_COLLECTORS", "accounting.metrics.UsageCollector")

# --- Fair use: notifications (notifications/) --------------------------------------------
# A failed delivery is retried after NOTIFY_RETRY_SECONDS, doubling each time (at most an
# hour), and given up after NOTIFY_MAX_ATTEMPTS tries. A webhook call waits at most
# NOTIFY_CONNECT_TIMEOUT to connect and NOTIFY_SEND_TIMEOUT for each read of the answer.
NOTIFY_RETRY_SECONDS = envint("NOTIFY_RETRY_SECONDS", 30)
NOTIFY_MAX_ATTEMPTS = envint("NOTIFY_MAX_ATTEMPTS", 6)
NOTIFY_SEND_TIMEOUT = envfloat("NOTIFY_SEND_TIMEOUT", 5.0)
NOTIFY_CONNECT_TIMEOUT = envfloat("NOTIFY_CONNECT_TIMEOUT", 3.0)
# Webhooks may go to internal addresses (loopback, private networks, ...) only when listed
# here: host names (mattermost.lab.example) or networks (10.20.0.0/16, 10.20.0.7, fd12::/64).
NOTIFY_ALLOWED_TARGETS = envlist("NOTIFY_ALLOWED_TARGETS", "")
# Channels one user may have (mail included).
NOTIFY_MAX_CHANNELS = envint("NOTIFY_MAX_CHANNELS", 10)
# Deliveries are sent by a process of their own (the supervisor's notifications sender), on
# this many threads, at most NOTIFY_SENDS_PER_USER at once for one user's channels.
NOTIFY_SENDER_THREADS = envint("NOTIFY_SENDER_THREADS", 4)
NOTIFY_SENDS_PER_USER = envint("NOTIFY_SENDS_PER_USER", 2)
# /healthz fails when a delivery has been due for longer than this (the sender is not
# keeping up, or not running).
NOTIFY_BACKLOG_SECONDS = envint("NOTIFY_BACKLOG_SECONDS", 300)
# Owners are told once when their queued job has waited this many hours (0: never).
QUEUE_NOTIFY_WAITING_HOURS = envfloat("QUEUE_NOTIFY_WAITING_HOURS", 6.0)

# --- No SSH in the request path (issue 20, item 5) ---------------------------------------------
# Requests never call a host (monitoring.transport refuses while one is served): actions,
# log reads, port picks and sign-up proofs are done by the workers.
MIDDLEWARE.insert(0, "hiveproject.middleware.NoHostCalls")
# The most of a task's log kept in the database (its end); the workers fetch at most
# JOBS_LOG_FETCH_BYTES per task and sync round, within SSH_COMMAND_TIMEOUT.
JOBS_LOG_KEEP_BYTES = envint("JOBS_LOG_KEEP_BYTES", 1024 * 1024)
JOBS_LOG_FETCH_BYTES = envint("JOBS_LOG_FETCH_BYTES", 256 * 1024)
# How long a request waits for the workers' answer (free ports, a sign-up's proof).
WORKER_ANSWER_SECONDS = envfloat("WORKER_ANSWER_SECONDS", 2 * SSH_CONNECT_TIMEOUT + 10)
# A host connection unused this long is closed (workers keep one per host and account).
SSH_IDLE_SECONDS = envfloat("SSH_IDLE_SECONDS", 300.0)

# --- Bounded requests (issue 20) ------------------------------------------------------------
# Bodies over this many bytes get 413 before they are read (hiveproject/limits.py); Django's
# own bound agrees, so a form cannot go around it.
REQUEST_MAX_BODY_BYTES = envint("REQUEST_MAX_BODY_BYTES", 2 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_MAX_BODY_BYTES
# JSON nested deeper than this is refused with 400 (Python's parser fails near 1,000 levels).
REQUEST_MAX_JSON_DEPTH = envint("REQUEST_MAX_JSON_DEPTH", 32)
# The web server's bounds on a request's head (hiveproject/webserver.py), as the shipped nginx
# site has them: one line (request line or header field) at most 8 KiB (large_client_header_
# buffers 4 8k: 414 or 431 beyond), the whole head at most 32 KiB and 100 fields (431), the
# head within 60 s and no pause over 60 s in a body or between requests (client_header_timeout,
# client_body_timeout).
REQUEST_MAX_HEADER_LINE_BYTES = envint("REQUEST_MAX_HEADER_LINE_BYTES", 8 * 1024)
REQUEST_MAX_HEADER_BYTES = envint("REQUEST_MAX_HEADER_BYTES", 32 * 1024)
REQUEST_MAX_HEADERS = envint("REQUEST_MAX_HEADERS", 100)
REQUEST_READ_TIMEOUT = envfloat("REQUEST_READ_TIMEOUT", 60.0)
# Ids in one list (GPUs of a booking, tasks of a bulk action) and tasks in one job (rows, grid
# combinations, nodes, queued tasks): a 10,000-task job took minutes and stalled other users.
API_MAX_IDS = envint("API_MAX_IDS", 1000)
JOBS_MAX_TASKS = envint("JOBS_MAX_TASKS", 500)
# One user's unfinished tasks in jobs, and tasks waiting in the queue, at most (a refusal
# names the cap): thousands of one person's tasks slowed every sync and start for everyone.
JOBS_MAX_UNFINISHED_TASKS_PER_USER = envint("JOBS_MAX_UNFINISHED_TASKS_PER_USER", 1000)
QUEUE_MAX_WAITING_TASKS_PER_USER = envint("QUEUE_MAX_WAITING_TASKS_PER_USER", 1000)

# --- Writes under contention (issue 20) -----------------------------------------------------
# On SQLite a write waits this long in all for its turn (hiveproject/sqlite3) before the
# request is answered 503 with Retry-After (DATABASE_RETRY_AFTER seconds), never a 500.
DATABASE_LOCK_WAIT = envfloat("DATABASE_LOCK_WAIT", 30)
DATABASE_RETRY_AFTER = envint("DATABASE_RETRY_AFTER", 5)

# --- Paged lists (issue 20) -------------------------------------------------------------------
# Every API list answers pages of this many objects (?page_size= up to the maximum); the
# paging is in the Link and X-Total-Count headers, the body stays an array.
REST_FRAMEWORK["DEFAULT_PAGINATION_CLASS"] = "hiveproject.pagination.LinkHeaderPagination"
API_PAGE_SIZE = envint("API_PAGE_SIZE", 100)
API_MAX_PAGE_SIZE = envint("API_MAX_PAGE_SIZE", 1000)

# --- Web interface (issue 17): one design system, grouped navigation, error pages ---
TEMPLATES[0]["OPTIONS"]["context_processors"].append("hiveproject.navigation.navigation")
FORM_RENDERER = "hiveproject.forms.BootstrapRenderer"
INSTALLED_APPS += ["board"]
# Pages show times in the reader's zone (after authentication, which it reads).
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
    "board.middleware.UserTimeZoneMiddleware",
)
# A refused form (CSRF) gets the site's page, not Django's bare one (templates/403_csrf.html).
CSRF_FAILURE_VIEW = "board.views.csrf_failure"
# Pages go out compressed: GZipMiddleware, in the scale-and-speed block above.
