"""Settings for the GPU service, read from the environment.

One pass, grouped by concern: Django's own wiring first (no environment in it), then each
part of the service with the environment variables it reads. Every variable is declared
once, where it is used, with its kind, default and a one-line help (core/env.py);
docs/settings.md is generated from these declarations (bin/settings-reference).

Every default runs the embedded profile (SQLite under HIVE_DATA_DIR, the django-q2 ORM
broker, an in-memory channel layer). Setting DATABASE_URL and REDIS_URL switches to the
production profile. Values may also come from ``HIVE_DATA_DIR/hive.env`` (written by
``manage.py init``); the process environment always wins over that file. A value that does
not parse stops the start, before anything is written, with an error naming it.
"""

import os
import secrets
import sys
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url

from core.env import Env

BASE_DIR = Path(__file__).resolve().parent.parent
env = Env(os.environ)

# === Django's wiring ======================================================================

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
    "core",
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
    "board",
]

MIDDLEWARE = [
    # Requests never call a host (core.hostcalls refuses while one is served): actions,
    # log reads, port picks and sign-up proofs are done by the workers.
    "core.hostcalls.NoHostCalls",
    # HTML and JSON go out compressed to clients that accept it (lists and the board shrink
    # 5-10×); outermost, so it compresses what every other middleware wrote. Static files
    # come precompressed from whitenoise. CSRF tokens are masked per response, so the
    # compression does not leak them (BREACH).
    "django.middleware.gzip.GZipMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Body size, JSON depth and NUL refused before any view or the database.
    "core.limits.RequestLimits",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Pages show times in the reader's zone (after authentication, which it reads).
    "accesscontrol.zones.UserTimeZoneMiddleware",
    # Lets audit entries written by model signals name the signed-in user.
    "audit.context.ActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # A write that found SQLite locked too long: 503 with Retry-After, not a 500.
    "core.api_errors.BusyDatabase",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "hiveproject.urls"
WSGI_APPLICATION = "hiveproject.wsgi.application"
ASGI_APPLICATION = "hiveproject.asgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

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
                # Owners see the intrusions going on, on every page.
                "protection.context_processors.intrusions",
                # The grouped navigation of the design system.
                "hiveproject.navigation.navigation",
            ],
        },
    },
]
FORM_RENDERER = "hiveproject.forms.BootstrapRenderer"
# A refused form (CSRF) gets the site's page, not Django's bare one (templates/403_csrf.html).
CSRF_FAILURE_VIEW = "core.api_errors.csrf_failure"

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
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
USE_I18N = True
USE_TZ = True

# === Data directory and profile ===========================================================
env.section("Data directory and profile")

HIVE_DATA_DIR = env.path(
    "HIVE_DATA_DIR",
    BASE_DIR / "data",
    "database, keys, generated secret, mail files; from the environment only (hive.env is in it)",
    shown="`data` in the checkout",
).resolve()
env.load_file(HIVE_DATA_DIR / "hive.env")

SECRET_KEY = env.text(
    "SECRET_KEY",
    "",
    "the same on every machine of one installation (sessions, signed links, task signatures)",
    shown="generated into the data dir",
)
DEBUG = env.boolean("DEBUG", False, "Django's debug pages; never on a reachable site")

DATABASE_URL = env.url(
    "DATABASE_URL",
    "",
    "e.g. `postgres://user@db/hive`: the production profile",
    schemes=("postgres", "postgresql", "pgsql", "sqlite"),
    shown="SQLite in the data dir",
)
# The embedded profile's SQLite: Django's, with writers queued in the process
# (core/sqlite3). IMMEDIATE takes the write lock at BEGIN, so concurrent writers
# queue on busy_timeout instead of failing with "database is locked" mid-transaction.
EMBEDDED_SQLITE = {
    "ENGINE": "core.sqlite3",
    "OPTIONS": {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    },
}
if DATABASE_URL:
    # Health checks make the pool test connections on checkout: ones a database restart cut
    # are replaced.
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_health_checks=True)}
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
# PostgreSQL's pool, one per process: under ASGI every request runs in a thread of its own, so
# without a bound 200 busy users opened more connections than PostgreSQL allows ("too many
# clients already", bench/load). Requests wait for a pooled connection instead.
_pool = {
    "min_size": 1,
    "max_size": env.integer("DATABASE_POOL_SIZE", 20, "PostgreSQL: connections per process", min=1),
    "timeout": env.number(
        "DATABASE_POOL_TIMEOUT",
        10,
        "PostgreSQL: seconds a request waits for a pooled connection",
        positive=True,
    ),
}
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = _pool
elif DATABASE_URL and DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A SQLite file named by URL (the tests' service processes, a moved data file) is run as
    # the embedded one is: Django's plain backend would meet other processes' writers with
    # "database is locked".
    DATABASES["default"].update(EMBEDDED_SQLITE)
if not DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # DRF imports django.contrib.postgres's fields wherever it can (rest_framework.compat),
    # and they import psycopg with the libpq and OpenSSL it bundles: 9 MiB more in the web
    # process, for a database this one does not use. Marked missing, the import fails as DRF
    # expects where psycopg is not installed.
    sys.modules.setdefault("django.contrib.postgres.fields", None)

# On SQLite a write waits this long in all for its turn (core/sqlite3) before the
# request is answered 503 with Retry-After, never a 500.
DATABASE_LOCK_WAIT = env.number(
    "DATABASE_LOCK_WAIT", 30, "SQLite: seconds a write may wait for its turn in all"
)
DATABASE_RETRY_AFTER = env.integer(
    "DATABASE_RETRY_AFTER", 5, "SQLite: the `Retry-After` (seconds) of the 503 after that"
)

REDIS_URL = env.url(
    "REDIS_URL",
    "",
    "e.g. `redis://cache:6379/0`: broker, channel layer and shared counters",
    schemes=("redis", "rediss", "unix"),
    shown="ORM broker, in-memory channel layer",
)
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    # Counters every web process shares (sign-in and mail limits, throttles).
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # The shared counters in a database table (created by migrate).
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "hive_cache",
        }
    }

# === Time and logs ========================================================================
env.section("Time and logs")

# Stored in UTC; shown in the site's zone. Weekly access windows are evaluated in it too.
SITE_TIME_ZONE = env.timezone(
    "SITE_TIME_ZONE", "UTC", "the lab's zone: times shown, weekly windows and accounting days"
)
TIME_ZONE = SITE_TIME_ZONE

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# django-q2 logs a line per task at INFO; the supervisor prints one summary a minute instead.
Q_LOG_LEVEL = env.choice(
    "Q_LOG_LEVEL", "WARNING", "django-q2's log level (`INFO`: a line per task)", _LOG_LEVELS
)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {
        "handlers": ["console"],
        "level": env.choice("LOG_LEVEL", "INFO", "the root logger's level", _LOG_LEVELS),
    },
    "loggers": {
        # Connection failures are recorded on the host; paramiko's own tracebacks are noise.
        "paramiko": {"level": "CRITICAL"},
        "django-q": {"level": Q_LOG_LEVEL},
    },
}
# `serve --access-log` overrides it.
ACCESS_LOG = env.text(
    "ACCESS_LOG",
    "",
    "`serve`'s access log, a line per request: empty for none, `-` for the console, "
    "else a file (relative: in the data dir)",
)

# === Web, HTTPS and proxies ===============================================================
env.section("Web, HTTPS and proxies")

# Everything follows PUBLIC_URL: https turns the secure profile on, a path (https://lab.org/gpus)
# serves the site under that prefix. Each part can still be set on its own.
PUBLIC_URL = env.url(
    "PUBLIC_URL",
    "http://localhost:8000",
    "the URL users open; its scheme and path set the defaults below",
    schemes=("http", "https"),
    host=True,
)
_PUBLIC = urlsplit(PUBLIC_URL)
ALLOWED_HOSTS = env.csv(
    "ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]", "host names the site answers to"
)
# Browsers send Origin as scheme://host[:port], never with the sub-path.
CSRF_TRUSTED_ORIGINS = env.csv(
    "CSRF_TRUSTED_ORIGINS",
    f"{_PUBLIC.scheme}://{_PUBLIC.netloc}",
    "origins whose forms are accepted",
    shown="the scheme and host of `PUBLIC_URL`",
)
# The proxy passes the full path (/gpus/...); Django strips the prefix and puts it back into
# every URL it builds. "" when served at the root.
HIVE_URL_PREFIX = (
    "/"
    + env.text(
        "HIVE_URL_PREFIX",
        _PUBLIC.path,
        "serve under a sub-path: links, redirects, static files, websockets and cookie "
        "paths carry it",
        shown="the path of `PUBLIC_URL`",
    ).strip("/")
).rstrip("/")
FORCE_SCRIPT_NAME = HIVE_URL_PREFIX or None
# Cookies stay under the prefix, so other sites on the same host never receive them.
SESSION_COOKIE_PATH = CSRF_COOKIE_PATH = HIVE_URL_PREFIX or "/"
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

HIVE_SECURE = env.boolean(
    "HIVE_SECURE",
    _PUBLIC.scheme == "https",
    "HTTPS redirect, `Secure` cookies, HSTS",
    shown="on when `PUBLIC_URL` is `https://`",
)
SECURE_SSL_REDIRECT = env.boolean(
    "SECURE_SSL_REDIRECT", HIVE_SECURE, "redirect http to https", shown="`HIVE_SECURE`"
)
SESSION_COOKIE_SECURE = env.boolean(
    "SESSION_COOKIE_SECURE", HIVE_SECURE, "session cookie over https only", shown="`HIVE_SECURE`"
)
CSRF_COOKIE_SECURE = env.boolean(
    "CSRF_COOKIE_SECURE", HIVE_SECURE, "CSRF cookie over https only", shown="`HIVE_SECURE`"
)
# HSTS cannot be taken back for its duration: it is on only when the site is https anyway.
SECURE_HSTS_SECONDS = env.integer(
    "SECURE_HSTS_SECONDS",
    31536000 if HIVE_SECURE else 0,
    "how long browsers keep to https (HSTS)",
    shown="1 year with `HIVE_SECURE`, else `0`",
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.boolean(
    "SECURE_HSTS_INCLUDE_SUBDOMAINS", HIVE_SECURE, "HSTS for subdomains too", shown="`HIVE_SECURE`"
)
SECURE_HSTS_PRELOAD = env.boolean(
    "SECURE_HSTS_PRELOAD", HIVE_SECURE, "HSTS preload flag", shown="`HIVE_SECURE`"
)
# Monitors and load balancers ask /healthz over plain http on the internal network.
SECURE_REDIRECT_EXEMPT = [r"(^|/)healthz$"]

# Behind nginx, the proxy says whether the browser used https and which host it asked for.
# Only set this when the proxy overwrites these headers and daphne is not reachable directly.
HIVE_BEHIND_PROXY = env.boolean(
    "HIVE_BEHIND_PROXY",
    False,
    "trust the proxy's `X-Forwarded-Proto` and `X-Forwarded-Host` (see docs/security.md)",
)
if HIVE_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = True
# The client's address is the X-Forwarded-For entry the nearest believed proxy wrote; with 0
# it is the socket's (core.clients, and DRF's throttles through REST_FRAMEWORK).
NUM_PROXIES = env.integer(
    "NUM_PROXIES",
    1 if HIVE_BEHIND_PROXY else 0,
    "proxies in front of daphne whose `X-Forwarded-For` entry is believed",
    shown="`1` with `HIVE_BEHIND_PROXY`, else `0`",
)
# Read by deploy/web-processes.sh from hive.env, not by Django; declared so that a bad value
# stops the service too, and so that the reference lists them.
env.integer("WEB_PROCESSES", 1, "web processes per web machine (deploy/web-processes.sh)", min=1)
env.integer(
    "WEB_PORT",
    8000,
    "the first of their loopback ports: `WEB_PORT`, `WEB_PORT`+1, …",
    min=1,
    max=65535,
)

# === Requests and the API =================================================================
env.section("Requests and the API")

# Bodies over this many bytes get 413 before they are read (core/limits.py); Django's
# own bound agrees, so a form cannot go around it.
REQUEST_MAX_BODY_BYTES = env.integer(
    "REQUEST_MAX_BODY_BYTES", 2 * 1024 * 1024, "largest request body (413 beyond)", min=1
)
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_MAX_BODY_BYTES
# Python's JSON parser fails near 1,000 levels.
REQUEST_MAX_JSON_DEPTH = env.integer(
    "REQUEST_MAX_JSON_DEPTH", 32, "deepest nesting in a JSON body (400 beyond)", min=1
)
# The web server's bounds on a request's head (core/webserver.py), as the shipped nginx
# site has them: large_client_header_buffers 4 8k, client_header_timeout, client_body_timeout.
REQUEST_MAX_HEADER_LINE_BYTES = env.integer(
    "REQUEST_MAX_HEADER_LINE_BYTES",
    8 * 1024,
    "longest request line or header field (414 or 431 beyond)",
    min=1,
)
REQUEST_MAX_HEADER_BYTES = env.integer(
    "REQUEST_MAX_HEADER_BYTES", 32 * 1024, "largest request head (431 beyond)", min=1
)
REQUEST_MAX_HEADERS = env.integer(
    "REQUEST_MAX_HEADERS", 100, "most header fields in a request (431 beyond)", min=1
)
REQUEST_READ_TIMEOUT = env.number(
    "REQUEST_READ_TIMEOUT",
    60.0,
    "seconds for a head to arrive, and the longest pause in a body or between requests",
    positive=True,
)
# Lists answer pages (core.pagination); the paging is in the Link and X-Total-Count
# headers, the body stays an array.
API_PAGE_SIZE = env.integer("API_PAGE_SIZE", 100, "objects per page of an API list", min=1)
API_MAX_PAGE_SIZE = env.integer(
    "API_MAX_PAGE_SIZE", 1000, "the most `?page_size=` may ask for", min=1
)
# Ids in one list (GPUs of a booking, tasks of a bulk action).
API_MAX_IDS = env.integer("API_MAX_IDS", 1000, "ids in one list of a request", min=1)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "apitokens.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # drf-spectacular's, documenting the error answers of every operation.
    "DEFAULT_SCHEMA_CLASS": "hiveproject.api_schema.HiveAutoSchema",
    # One error shape everywhere: {"detail": message, <field>: [messages]...}.
    "EXCEPTION_HANDLER": "core.api_errors.exception_handler",
    # Answers written by orjson (same bytes as DRF's JSON renderer), the browsable API kept.
    "DEFAULT_RENDERER_CLASSES": [
        "hiveproject.renderers.FastJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.LinkHeaderPagination",
    # Only views that name a throttle scope are limited (token endpoints); see apitokens.
    "DEFAULT_THROTTLE_RATES": {
        "tokens": env.text(
            "TOKEN_THROTTLE_RATE",
            "30/minute",
            "requests per user or address to the token endpoints",
            pattern=r"\d+/(s|sec|second|m|min|minute|h|hour|d|day)",
            accepts="`N/second`, `N/minute`, `N/hour` or `N/day`",
        )
    },
    "NUM_PROXIES": NUM_PROXIES,  # the throttles see the same client address
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
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",  # the default
        "hiveproject.api_schema.empty_means_absent",
    ],
    # Enums that several components share keep one name each (tasks' and bookings' status);
    # API tokens have a "state" and distributed jobs a "kind" too: the schema keeps its names
    # for theirs and names the queue's.
    "ENUM_NAME_OVERRIDES": {
        "TaskStatusEnum": "jobs.models.Task.Status",
        "ReservationStatusEnum": "reservations.models.Reservation.Status",
        "QueuedJobStateEnum": "queueing.models.QueuedJob.State",
        "QueuedTaskKindEnum": "queueing.models.QueuedTask.Kind",
        "StateEnum": ["active", "expired", "revoked"],
        "KindEnum": "jobs.distributed.KINDS.items",
    },
}

# === Sign-in and accounts =================================================================
env.section("Sign-in and accounts")

# Failed sign-ins per username and address before the login form says "wait".
LOGIN_ATTEMPTS = env.integer(
    "LOGIN_ATTEMPTS", 5, "failed sign-ins per user name and address within the window", min=1
)
LOGIN_ATTEMPT_WINDOW = env.integer(
    "LOGIN_ATTEMPT_WINDOW", 300, "seconds over which failed sign-ins are counted", min=1
)
# Failed sign-ins from one address whatever the names (spraying), and on the whole site
# (spraying from many addresses). Reaching the site's count brakes, it does not lock: an
# address is then refused after LOGIN_BRAKE_ADDRESS_ATTEMPTS failures of its own, and one
# with fewer (the innocent) still signs in (apitokens.signin).
LOGIN_ADDRESS_ATTEMPTS = env.integer(
    "LOGIN_ADDRESS_ATTEMPTS", 20, "failed sign-ins per address within the window", min=1
)
LOGIN_SITE_ATTEMPTS = env.integer(
    "LOGIN_SITE_ATTEMPTS", 1000, "failed sign-ins on the whole site within the window", min=1
)
LOGIN_BRAKE_ADDRESS_ATTEMPTS = env.integer(
    "LOGIN_BRAKE_ADDRESS_ATTEMPTS",
    3,
    "once the site's count is reached, failures an address may have before it is refused",
    min=1,
)
PASSWORD_RESET_MAILS_PER_RECIPIENT = env.integer(
    "PASSWORD_RESET_MAILS_PER_RECIPIENT", 3, "password-reset mails per recipient, per hour"
)
PASSWORD_RESET_MAILS_PER_ADDRESS = env.integer(
    "PASSWORD_RESET_MAILS_PER_ADDRESS", 10, "password-reset mails per asking address, per hour"
)
SELF_SIGNUP = env.boolean(
    "SELF_SIGNUP",
    False,
    "let people create an account by proving a UNIX account on a probed host",
)
# Each proof is an SSH login on a host.
SIGNUP_ATTEMPTS = env.integer(
    "SIGNUP_ATTEMPTS", 10, "sign-up proofs per address and per claimed name, per hour"
)
RUN_AS_MIN_UID = env.integer(
    "RUN_AS_MIN_UID",
    1000,
    "jobs never run below this UID, nor as root, a monitoring account or the service's "
    "account, without an admin's allowance",
)
# Own processes and, for admins of the host, everyone's; others read "command hidden".
PROCESS_VISIBILITY = env.text(
    "PROCESS_VISIBILITY",
    "accesscontrol.accounts.ProcessVisibility",
    "who sees which GPU processes' command lines (a dotted path)",
)

# === Sign-in with the lab's directory =====================================================
env.section("Sign-in with the lab's directory (LDAP) or provider (OIDC)")

# Both off unless configured (docs/operating.md, "Sign in with the lab's directory"). Their
# backends come after ModelBackend: local accounts sign in whether the directory answers or
# not. The directory's libraries (python-ldap builds from source) are not in the runtime's
# lock: requirements-directory.txt has them, for the sites that turn LDAP on.
HIVE_DIRECTORY_LOCAL_GROUPS = env.csv(
    "HIVE_DIRECTORY_LOCAL_GROUPS",
    "everyone",
    "groups the directory and the provider never add anyone to or take anyone out of; the "
    "user's other groups follow theirs",
)
HIVE_LDAP_SERVER_URI = env.url(
    "HIVE_LDAP_SERVER_URI",
    "",
    "e.g. `ldaps://ldap.lab.example.org`: sign-in with the directory is on (it needs "
    "requirements-directory.txt installed)",
    schemes=("ldap", "ldaps", "ldapi"),
    shown="(unset: off)",
)
# Searches bind as this DN; the password is checked by binding as the user, at the DN the
# search found or the template makes.
_LDAP_BIND_DN = env.text(
    "HIVE_LDAP_BIND_DN",
    "",
    "the service's DN for searches; empty: they run as the person signing in",
    shown="(none)",
)
_LDAP_BIND_PASSWORD = env.secret("HIVE_LDAP_BIND_PASSWORD", "the service DN's password")
_LDAP_USER_SEARCH_BASE = env.text(
    "HIVE_LDAP_USER_SEARCH_BASE", "", "where people are found (a subtree search)", shown="(none)"
)
_LDAP_USER_SEARCH_FILTER = env.text(
    "HIVE_LDAP_USER_SEARCH_FILTER",
    "(uid=%(user)s)",
    "how a person is found there (`%(user)s`: the name typed)",
    pattern=r"\(.*%\(user\)s.*\)",
    accepts="an LDAP filter with `%(user)s`",
)
_LDAP_USER_DN_TEMPLATE = env.text(
    "HIVE_LDAP_USER_DN_TEMPLATE",
    "",
    "instead of a search: bind directly at e.g. `uid=%(user)s,ou=people,dc=lab,dc=org`",
    pattern=r"(.*%\(user\)s.*)?",
    accepts="a DN with `%(user)s`",
    shown="(none)",
)
# The entry's attributes that name the user's UNIX account (posixAccount) and its UID.
_LDAP_ATTRIBUTE = r"[A-Za-z][A-Za-z0-9-]*"
HIVE_LDAP_UNIX_NAME_ATTR = env.text(
    "HIVE_LDAP_UNIX_NAME_ATTR",
    "uid",
    "the entry's attribute naming the UNIX account jobs run as on every host",
    pattern=_LDAP_ATTRIBUTE,
    accepts="an attribute name",
)
HIVE_LDAP_UID_NUMBER_ATTR = env.text(
    "HIVE_LDAP_UID_NUMBER_ATTR",
    "uidNumber",
    "the entry's attribute holding that account's UID",
    pattern=_LDAP_ATTRIBUTE,
    accepts="an attribute name",
)
_LDAP_GROUP_SEARCH_BASE = env.text(
    "HIVE_LDAP_GROUP_SEARCH_BASE",
    "",
    "where groups are found; empty: groups are not touched",
    shown="(none)",
)
# HIVE_LDAP_GROUP_TYPE: django-auth-ldap's group type, and the object class of the groups.
_LDAP_GROUP_TYPES = {
    "posixGroup": ("PosixGroupType", "posixGroup"),
    "groupOfNames": ("GroupOfNamesType", "groupOfNames"),
    "nestedGroupOfNames": ("NestedGroupOfNamesType", "groupOfNames"),
    "groupOfUniqueNames": ("GroupOfUniqueNamesType", "groupOfUniqueNames"),
    "activeDirectory": ("ActiveDirectoryGroupType", "group"),
}
_LDAP_GROUP_TYPE = env.choice(
    "HIVE_LDAP_GROUP_TYPE",
    "posixGroup",
    "how membership is kept (`posixGroup`: memberUid, and the primary gidNumber)",
    tuple(_LDAP_GROUP_TYPES),
)
_LDAP_GROUP_SEARCH_FILTER = env.text(
    "HIVE_LDAP_GROUP_SEARCH_FILTER",
    f"(objectClass={_LDAP_GROUP_TYPES[_LDAP_GROUP_TYPE][1]})",
    "which entries there are groups",
    pattern=r"\(.*\)",
    accepts="an LDAP filter",
    shown="`(objectClass=…)` of the group type",
)
_LDAP_GROUP_NAME_ATTR = env.text(
    "HIVE_LDAP_GROUP_NAME_ATTR",
    "cn",
    "the group's attribute that names it here",
    pattern=_LDAP_ATTRIBUTE,
    accepts="an attribute name",
)
_LDAP_REQUIRE_GROUP = env.text(
    "HIVE_LDAP_REQUIRE_GROUP", "", "a group's DN: only its members may sign in", shown="(none)"
)
_LDAP_START_TLS = env.boolean("HIVE_LDAP_START_TLS", False, "StartTLS on an `ldap://` URI")
_LDAP_TLS_CA_FILE = env.text(
    "HIVE_LDAP_TLS_CA_FILE",
    "",
    "CA certificates to check the directory's certificate with",
    shown="the system's",
)
_LDAP_TLS_REQUIRE_CERT = env.choice(
    "HIVE_LDAP_TLS_REQUIRE_CERT",
    "",
    "how the directory's certificate is checked",
    ("demand", "hard", "try", "allow", "never"),
    shown="libldap's (`demand`)",
)
_LDAP_TIMEOUT = env.number(
    "HIVE_LDAP_TIMEOUT",
    5.0,
    "seconds to connect and for each answer: a directory that does not answer fails the "
    "sign-in then",
    positive=True,
)


def _ldap_libraries():
    """python-ldap and django-auth-ldap's config module; None, and an error noted, where
    requirements-directory.txt is not installed."""
    try:
        import ldap
        from django_auth_ldap import config
    except ImportError as missing:
        env.error(
            f"HIVE_LDAP_SERVER_URI is set, but the directory's libraries are not installed "
            f"(no module {missing.name}): install requirements-directory.txt, "
            "`.venv/bin/pip install --require-hashes -r requirements-directory.txt`, after "
            "its build headers (docs/operating.md, Sign in with the lab's directory)"
        )
        return None
    return ldap, config


if HIVE_LDAP_SERVER_URI and not (_LDAP_USER_SEARCH_BASE or _LDAP_USER_DN_TEMPLATE):
    env.error(
        "HIVE_LDAP_SERVER_URI is set: set HIVE_LDAP_USER_SEARCH_BASE (search) or "
        "HIVE_LDAP_USER_DN_TEMPLATE (direct bind) too"
    )
_ldap = _ldap_libraries() if HIVE_LDAP_SERVER_URI else None
if _ldap:
    ldap, ldap_config = _ldap
    AUTHENTICATION_BACKENDS.insert(2, "accesscontrol.directory.DirectoryBackend")
    AUTH_LDAP_SERVER_URI = HIVE_LDAP_SERVER_URI
    AUTH_LDAP_BIND_DN = _LDAP_BIND_DN
    AUTH_LDAP_BIND_PASSWORD = _LDAP_BIND_PASSWORD
    AUTH_LDAP_USER_DN_TEMPLATE = _LDAP_USER_DN_TEMPLATE or None
    # Without a bind DN the entry and groups are read as the user just bound (not anonymously).
    AUTH_LDAP_BIND_AS_AUTHENTICATING_USER = not _LDAP_BIND_DN
    if _LDAP_USER_SEARCH_BASE:
        AUTH_LDAP_USER_SEARCH = ldap_config.LDAPSearch(
            _LDAP_USER_SEARCH_BASE, ldap.SCOPE_SUBTREE, _LDAP_USER_SEARCH_FILTER
        )
    AUTH_LDAP_USER_ATTR_MAP = {"first_name": "givenName", "last_name": "sn", "email": "mail"}
    AUTH_LDAP_REQUIRE_GROUP = _LDAP_REQUIRE_GROUP or None
    _group_type = getattr(ldap_config, _LDAP_GROUP_TYPES[_LDAP_GROUP_TYPE][0])
    AUTH_LDAP_GROUP_TYPE = _group_type(name_attr=_LDAP_GROUP_NAME_ATTR)
    if _LDAP_GROUP_SEARCH_BASE:
        AUTH_LDAP_GROUP_SEARCH = ldap_config.LDAPSearch(
            _LDAP_GROUP_SEARCH_BASE, ldap.SCOPE_SUBTREE, _LDAP_GROUP_SEARCH_FILTER
        )
        # The user's groups become the directory's at each sign-in, the local ones kept.
        if HIVE_DIRECTORY_LOCAL_GROUPS:
            AUTH_LDAP_MIRROR_GROUPS_EXCEPT = frozenset(HIVE_DIRECTORY_LOCAL_GROUPS)
        else:
            AUTH_LDAP_MIRROR_GROUPS = True
    AUTH_LDAP_CONNECTION_OPTIONS = {
        ldap.OPT_NETWORK_TIMEOUT: _LDAP_TIMEOUT,
        ldap.OPT_TIMEOUT: _LDAP_TIMEOUT,
        ldap.OPT_REFERRALS: 0,
    }
    AUTH_LDAP_START_TLS = _LDAP_START_TLS
    if _LDAP_TLS_CA_FILE:
        AUTH_LDAP_CONNECTION_OPTIONS[ldap.OPT_X_TLS_CACERTFILE] = _LDAP_TLS_CA_FILE
    if _LDAP_TLS_REQUIRE_CERT:
        AUTH_LDAP_CONNECTION_OPTIONS[ldap.OPT_X_TLS_REQUIRE_CERT] = getattr(
            ldap, f"OPT_X_TLS_{_LDAP_TLS_REQUIRE_CERT.upper()}"
        )
    if _LDAP_TLS_CA_FILE or _LDAP_TLS_REQUIRE_CERT:
        AUTH_LDAP_CONNECTION_OPTIONS[ldap.OPT_X_TLS_NEWCTX] = 0  # last: applies the TLS options

# OIDC (mozilla-django-oidc): the sign-in page offers "Sign in with HIVE_OIDC_PROVIDER_NAME".
# Register PUBLIC_URL + /oidc/callback/ as the redirect URI at the provider; `manage.py
# oidc_discover ISSUER` prints the endpoints from the provider's discovery document (the
# service never asks it at start: a provider that is down must not stop the service).
HIVE_OIDC_CLIENT_ID = env.text(
    "HIVE_OIDC_CLIENT_ID",
    "",
    "the client's id at the provider: the **Sign in with** button and the provider's "
    "sign-in are on",
    shown="(unset: off)",
)
_OIDC_CLIENT_SECRET = env.secret("HIVE_OIDC_CLIENT_SECRET", "the client's secret")
HIVE_OIDC_PROVIDER_NAME = env.text(
    "HIVE_OIDC_PROVIDER_NAME",
    "your organisation's account",
    "the button says **Sign in with** this",
)
_OIDC_ENDPOINTS = {
    name: env.url(
        f"HIVE_OIDC_{name}_ENDPOINT",
        "",
        f"the provider's {name.lower()} endpoint (`oidc_discover` prints it)",
        schemes=("https", "http"),
        host=True,
        shown="(none)",
    )
    for name in ("AUTHORIZATION", "TOKEN", "USERINFO", "JWKS")
}
# mozilla-django-oidc checks RS* and ES* signatures with the provider's keys (JWKS endpoint),
# HS* with the client's secret.
_OIDC_SIGN_ALGO = env.choice(
    "HIVE_OIDC_SIGN_ALGO",
    "RS256",
    "how the provider signs ID tokens",
    tuple(f"{family}{bits}" for family in ("RS", "ES", "HS") for bits in (256, 384, 512)),
)
_OIDC_SCOPES = env.text(
    "HIVE_OIDC_SCOPES",
    "openid email profile",
    "scopes asked for: add the one that carries the UNIX name and groups claims, if any",
    pattern=r"(\S+\s+)*openid(\s+\S+)*",
    accepts="scopes separated by spaces, `openid` among them",
    shown="`openid email profile`",
)
# The claims naming the web user (matched by name, never by mail, which a provider may let
# people set), the UNIX account on every host and the groups.
HIVE_OIDC_USERNAME_CLAIM = env.text(
    "HIVE_OIDC_USERNAME_CLAIM",
    "preferred_username",
    "the claim naming the web user",
    pattern=r"\S+",
    accepts="a claim's name",
)
HIVE_OIDC_UNIX_NAME_CLAIM = env.text(
    "HIVE_OIDC_UNIX_NAME_CLAIM",
    "",
    "the claim holding the UNIX account on every host; empty: admins map accounts",
    shown="(none)",
)
HIVE_OIDC_GROUPS_CLAIM = env.text(
    "HIVE_OIDC_GROUPS_CLAIM",
    "",
    "a claim listing group names the user's groups follow; empty: groups are not touched",
    shown="(none)",
)
_OIDC_USE_PKCE = env.boolean("HIVE_OIDC_USE_PKCE", True, "PKCE on the code flow")
_OIDC_TIMEOUT = env.number(
    "HIVE_OIDC_TIMEOUT", 10.0, "seconds for each call to the provider", positive=True
)
if HIVE_OIDC_CLIENT_ID:
    _needed = [f"HIVE_OIDC_{name}_ENDPOINT" for name, url in _OIDC_ENDPOINTS.items() if not url]
    if _OIDC_SIGN_ALGO.startswith("HS") and "HIVE_OIDC_JWKS_ENDPOINT" in _needed:
        _needed.remove("HIVE_OIDC_JWKS_ENDPOINT")  # HS*: the client's secret is the key
    if _needed:
        env.error(
            f"HIVE_OIDC_CLIENT_ID is set: set {', '.join(_needed)} too "
            "(manage.py oidc_discover ISSUER prints them)"
        )
    AUTHENTICATION_BACKENDS.append("accesscontrol.oidc.ProviderBackend")
    OIDC_RP_CLIENT_ID = HIVE_OIDC_CLIENT_ID
    OIDC_RP_CLIENT_SECRET = _OIDC_CLIENT_SECRET
    OIDC_OP_AUTHORIZATION_ENDPOINT = _OIDC_ENDPOINTS["AUTHORIZATION"]
    OIDC_OP_TOKEN_ENDPOINT = _OIDC_ENDPOINTS["TOKEN"]
    OIDC_OP_USER_ENDPOINT = _OIDC_ENDPOINTS["USERINFO"]
    OIDC_OP_JWKS_ENDPOINT = _OIDC_ENDPOINTS["JWKS"] or None
    OIDC_RP_SIGN_ALGO = _OIDC_SIGN_ALGO
    OIDC_RP_SCOPES = " ".join(_OIDC_SCOPES.split())
    OIDC_USE_PKCE = _OIDC_USE_PKCE
    OIDC_TIMEOUT = _OIDC_TIMEOUT

# === Monitoring and SSH ===================================================================
env.section("Monitoring and SSH")

MONITORING_INTERVAL = env.number(
    "MONITORING_INTERVAL", 2.0, "seconds between probes of a host", positive=True
)
MONITORING_PROBE_THREADS = env.integer(
    "MONITORING_PROBE_THREADS",
    128,
    "hosts probed at the same moment (a thread each); more wait for the next cycle",
    min=1,
)
# A long-lived probe loop per host (monitoring/sessions.py) asked for one sample per cycle.
MONITORING_PROBE_SESSIONS = env.boolean(
    "MONITORING_PROBE_SESSIONS",
    True,
    "probe each SSH host through one long-lived probe loop; off: a new channel and shell per probe",
)
# Several cycles, so one slow cycle does not lose the lease.
MONITORING_LEASE_SECONDS = env.number(
    "MONITORING_LEASE_SECONDS",
    max(5 * MONITORING_INTERVAL, 10.0),
    "how long a silent probing loop keeps its lease, and the longest a crashed loop's "
    "successor waits",
    shown="5 intervals, at least `10`",
)
MONITORING_DISK_PATHS = env.csv(
    "MONITORING_DISK_PATHS",
    "/,/home",
    "absolute paths whose disk usage is probed on every host (missing ones are skipped)",
)
# History: a raw sample per host this often, averaged into minutes and hours, then pruned.
MONITORING_HISTORY_STEP = env.number(
    "MONITORING_HISTORY_STEP", 10.0, "seconds between stored raw samples per host"
)
MONITORING_RAW_RETENTION_HOURS = env.number(
    "MONITORING_RAW_RETENTION_HOURS", 24, "hours raw samples are kept"
)
MONITORING_MINUTE_RETENTION_DAYS = env.number(
    "MONITORING_MINUTE_RETENTION_DAYS", 30, "days minute averages are kept"
)
MONITORING_HOUR_RETENTION_DAYS = env.number(
    "MONITORING_HOUR_RETENTION_DAYS", 400, "days hour averages are kept"
)
SSH_KEY_PATH = HIVE_DATA_DIR / "ssh" / "id_ed25519"
SSH_CONNECT_TIMEOUT = env.number(
    "SSH_CONNECT_TIMEOUT", 5.0, "seconds to connect to a host", positive=True
)
SSH_COMMAND_TIMEOUT = env.number(
    "SSH_COMMAND_TIMEOUT", 20.0, "seconds a command on a host may take", positive=True
)
SSH_KEEPALIVE = env.integer(
    "SSH_KEEPALIVE", 15, "seconds between SSH keepalive packets on a host connection"
)
SSH_MAX_BACKOFF = env.number(
    "SSH_MAX_BACKOFF", 60.0, "longest pause between reconnect attempts to a failing host"
)
# Workers keep a connection per host and account.
SSH_IDLE_SECONDS = env.number(
    "SSH_IDLE_SECONDS", 300.0, "a host connection unused this long is closed"
)
NVIDIA_SMI_TIMEOUT = env.number(
    "NVIDIA_SMI_TIMEOUT",
    10.0,
    "a hung `nvidia-smi` is killed on the host after this",
    positive=True,
)
# Whose a GPU process in a Docker or Podman container is (monitoring/containers.py).
CONTAINER_OWNER_LABEL = env.text(
    "CONTAINER_OWNER_LABEL",
    "gpuhive.owner",
    "the container label naming the UNIX account a containerised GPU process belongs to",
    pattern=r"[A-Za-z0-9][A-Za-z0-9._/-]*",
    accepts="a label key (letters, digits, '.', '_', '/', '-')",
)
METRICS_TOKEN = env.text(
    "METRICS_TOKEN",
    "",
    "Prometheus scrapes `/metrics` with `Authorization: Bearer <token>`",
    shown="(unset: `/metrics` answers 403)",
)
METRICS_EXTRA_COLLECTORS = env.csv(
    "METRICS_EXTRA_COLLECTORS",
    "accounting.metrics.UsageCollector",
    "more collectors `/metrics` exports (dotted paths): per-user usage counters",
)

# === Workers ==============================================================================
env.section("Workers")

Q_CLUSTER = {
    "name": "hive",
    # One worker is held by the probing loop; the others run protection, queue and tasks.
    "workers": env.integer(
        "Q_WORKERS",
        3,
        "worker processes per machine (the probing loop holds one, cluster-wide)",
        min=1,
    ),
    "timeout": env.integer(
        "Q_TIMEOUT", 120, "seconds a worker task may run before django-q2 ends it", min=1
    ),
    "retry": env.integer(
        "Q_RETRY",
        180,
        "seconds after which django-q2 hands out again a task not acknowledged (ORM broker)",
        min=1,
    ),
    "max_attempts": 3,
    "catch_up": False,
    "save_limit": 500,
    "label": "Background tasks",
    "log_level": Q_LOG_LEVEL,
    **({"redis": REDIS_URL} if REDIS_URL else {"orm": "default"}),
}
# Well inside django-q2's timeout and retry, which would otherwise cut the loop short or
# start it twice.
MONITORING_LOOP_SECONDS = env.number(
    "MONITORING_LOOP_SECONDS",
    max(min(Q_CLUSTER["timeout"], Q_CLUSTER["retry"]) - 20, 10),
    "how long one probing-loop task runs before the next scheduled run takes over",
    shown="the smaller of `Q_TIMEOUT` and `Q_RETRY`, less 20 (at least 10)",
)
# `manage.py workers` (and `serve`) run the django-q2 cluster under a supervisor. A cluster in
# which no task finished for this long while work was due and a worker was free is stalled
# (e.g. a worker killed as next in line holds the task queue's lock for ever: django-q2 issue
# #23): it is killed as a whole and started again, and the reason recorded.
WORKERS_STALL_SECONDS = env.number(
    "WORKERS_STALL_SECONDS",
    max(15 * MONITORING_INTERVAL, 30.0),
    "the supervisor restarts a cluster in which no task finished this long while work was "
    "due; also `/healthz`'s limit for the last probe's and task's age",
    positive=True,
    shown="15 intervals, at least `30`",
)
# SIGINT to the cluster's process group, then SIGKILL to what is left.
WORKERS_STOP_GRACE_SECONDS = env.number(
    "WORKERS_STOP_GRACE_SECONDS", 10.0, "stopping the workers: SIGINT, then SIGKILL after this"
)
WORKER_ANSWER_SECONDS = env.number(
    "WORKER_ANSWER_SECONDS",
    2 * SSH_CONNECT_TIMEOUT + 10,
    "how long a request waits for the workers' answer (free ports, a sign-up's proof)",
    positive=True,
    shown="2 × `SSH_CONNECT_TIMEOUT` + 10",
)

# === Jobs =================================================================================
env.section("Jobs")

JOBS_LOG_DIR = env.text(
    "JOBS_LOG_DIR",
    "~/.gpuhive/logs",
    "where task logs, pid and exit files go on each host (`~/` is the account's home there)",
)
JOBS_SESSION_PREFIX = env.text(
    "JOBS_SESSION_PREFIX",
    "hive-task",
    "screen sessions are `PREFIX-<task id>`: give installations sharing hosts different ones",
)
# A scheduled (or graceful) stop sends SIGTERM first.
JOBS_STOP_GRACE_SECONDS = env.integer(
    "JOBS_STOP_GRACE_SECONDS", 30, "seconds between SIGTERM and SIGKILL of a stop"
)
# No worker task runs longer: a task still "starting" after it was left by a starter that
# died; the next sync adopts its screen session or puts it back to pending.
JOBS_START_TIMEOUT = env.integer(
    "JOBS_START_TIMEOUT",
    Q_CLUSTER["timeout"] + 30,
    "a task still starting after this many seconds was left by a dead starter; the next "
    "sync settles it",
    min=1,
    shown="`Q_TIMEOUT` + 30",
)
JOBS_LOG_CHUNK_BYTES = env.integer(
    "JOBS_LOG_CHUNK_BYTES", 65536, "the most log bytes one poll of the live log view returns", min=1
)
# The workers fetch logs within SSH_COMMAND_TIMEOUT.
JOBS_LOG_KEEP_BYTES = env.integer(
    "JOBS_LOG_KEEP_BYTES", 1024 * 1024, "the end of each task's log kept in the database"
)
JOBS_LOG_FETCH_BYTES = env.integer(
    "JOBS_LOG_FETCH_BYTES", 256 * 1024, "the most log bytes fetched per task and sync round", min=1
)
# Rows, grid combinations, nodes, queued tasks: a 10,000-task job took minutes and stalled
# other users.
JOBS_MAX_TASKS = env.integer("JOBS_MAX_TASKS", 500, "tasks in one job", min=1)
# Thousands of one person's tasks slowed every sync and start for everyone; a refusal names
# the cap.
JOBS_MAX_UNFINISHED_TASKS_PER_USER = env.integer(
    "JOBS_MAX_UNFINISHED_TASKS_PER_USER", 1000, "one user's unfinished tasks in jobs", min=1
)

# === Queue and fair use ===================================================================
env.section("Queue and fair use")

# The owner's own reservations do not count.
QUEUE_RESERVATION_HORIZON = env.integer(
    "QUEUE_RESERVATION_HORIZON",
    30,
    "minutes: another user's booking starting within this keeps queue jobs off the GPU",
)
# SIGTERM that long before; SIGKILL follows JOBS_STOP_GRACE_SECONDS later.
QUEUE_PREEMPT_LEAD_SECONDS = env.integer(
    "QUEUE_PREEMPT_LEAD_SECONDS",
    JOBS_STOP_GRACE_SECONDS + 60,
    "queue jobs are stopped this many seconds before another user's booking starts",
    shown="`JOBS_STOP_GRACE_SECONDS` + 60",
)
# Admins set quotas per group.
QUEUE_DEFAULT_MAX_PRIORITY = env.integer(
    "QUEUE_DEFAULT_MAX_PRIORITY", 0, "highest priority for users without a group quota", min=None
)
QUEUE_MAX_START_FAILURES = env.integer(
    "QUEUE_MAX_START_FAILURES", 3, "failed starts after which a queued job fails", min=1
)
QUEUE_MAX_WAITING_TASKS_PER_USER = env.integer(
    "QUEUE_MAX_WAITING_TASKS_PER_USER", 1000, "one user's tasks waiting in the queue", min=1
)
# GPU-hours from bookings and queue runs (queueing/fairshare.py).
QUEUE_FAIRSHARE_HALF_LIFE_HOURS = env.number(
    "QUEUE_FAIRSHARE_HALF_LIFE_HOURS",
    168.0,
    "usage counts half after this many hours; `0` turns fair share off",
)
QUEUE_FAIRSHARE_CACHE_SECONDS = env.integer(
    "QUEUE_FAIRSHARE_CACHE_SECONDS", 60, "how long pages and the API reuse computed factors"
)
QUEUE_NOTIFY_WAITING_HOURS = env.number(
    "QUEUE_NOTIFY_WAITING_HOURS",
    6.0,
    "a queued job waiting this many hours is told once to its owner (`0`: never)",
)
# Idle bookings given back (fairuse/), where no host or group has its own rule (admin › Fair
# use › idle policies). A reserved GPU is idle while it shows none of the owner's processes
# and a load under RESERVATION_IDLE_UTILIZATION %.
FAIRUSE_IDLE_ACTION = env.choice(
    "FAIRUSE_IDLE_ACTION",
    "off",
    "the site's idle rule: warn about idle bookings, and release their idle GPUs",
    ("off", "warn", "release"),
)
FAIRUSE_IDLE_MINUTES = env.integer(
    "FAIRUSE_IDLE_MINUTES", 30, "minutes a booking's GPUs are idle before the warning"
)
FAIRUSE_IDLE_GRACE_MINUTES = env.integer(
    "FAIRUSE_IDLE_GRACE_MINUTES",
    15,
    "minutes between the warning and the release, unless the owner keeps the booking",
)
ACCOUNTING_EMISSION_G_PER_KWH = env.number(
    "ACCOUNTING_EMISSION_G_PER_KWH",
    350.0,
    "grams of CO2e per kWh of the lab's electricity (350: a European average)",
)

# === Bookings =============================================================================
env.section("Bookings")

RESERVATION_MIN_MINUTES = env.integer("RESERVATION_MIN_MINUTES", 30, "shortest booking, minutes")
RESERVATION_MAX_DAYS = env.integer("RESERVATION_MAX_DAYS", 8, "longest booking, days", min=1)
RESERVATION_START_GRACE_SECONDS = env.integer(
    "RESERVATION_START_GRACE_SECONDS", 60, "how far in the past (seconds) a booking may start"
)
RESERVATION_REMIND_START_MINUTES = env.integer(
    "RESERVATION_REMIND_START_MINUTES", 30, "reminder this many minutes before a booking starts"
)
RESERVATION_REMIND_END_MINUTES = env.integer(
    "RESERVATION_REMIND_END_MINUTES", 30, "reminder this many minutes before a booking ends"
)
RESERVATION_IDLE_UTILIZATION = env.number(
    "RESERVATION_IDLE_UTILIZATION",
    5.0,
    "a reserved GPU under this load (%) is idle",
    max=100,
)
RESERVATION_IDLE_MINUTES = env.integer(
    "RESERVATION_IDLE_MINUTES",
    60,
    "the owner is warned once per GPU and booking after this many idle minutes",
)

# === Protection ===========================================================================
env.section("Protection")

# protection/config.py reads these when used (and checks them at start, for values that do
# not come from here).
PROTECTION_LEVEL = env.choice(
    "PROTECTION_LEVEL",
    "reserved",
    "`reserved`: intruders on reserved GPUs; `strict`: also any use without a reservation",
    ("off", "reserved", "strict"),
)
# One appearing during a reservation is flagged at first sight.
PROTECTION_GRACE_CYCLES = env.integer(
    "PROTECTION_GRACE_CYCLES",
    1,
    "extra probes a process already running when a booking begins (strict: any unreserved "
    "use) must be seen in before it is flagged",
)
PROTECTION_ALLOWED_USERS = env.csv(
    "PROTECTION_ALLOWED_USERS", "", "UNIX users whose processes are never flagged"
)
PROTECTION_ALLOWED_COMMANDS = env.csv(
    "PROTECTION_ALLOWED_COMMANDS",
    "root:*Xorg*,root:*Xwayland*,gdm:*gnome-shell*,gdm:*Xwayland*,root:*nvidia-persistenced*",
    "`USER:GLOB` command lines never flagged; `*` as user means anyone",
)
# By default the offender reads it on their terminal and in mail, and the booking's owner on
# their own notification channels (mail and chat, as they chose them).
VIOLATION_HANDLERS = env.json_or_csv(
    "VIOLATION_HANDLERS",
    [
        "protection.handlers.terminal.write_to_terminals",
        "protection.handlers.email.EmailHandler",
        "protection.handlers.notify.NotifyHandler",
    ],
    'dotted paths, or entries `{"handler": path, "options": {…}, "repeat_seconds": N}` '
    "(docs/protection.md)",
    shown="terminal message, mail, notifications",
)

# === Notifications and mail ===============================================================
env.section("Notifications and mail")

# Doubling each time, at most an hour.
NOTIFY_RETRY_SECONDS = env.integer(
    "NOTIFY_RETRY_SECONDS", 30, "first wait before a failed delivery is tried again", min=1
)
NOTIFY_MAX_ATTEMPTS = env.integer(
    "NOTIFY_MAX_ATTEMPTS", 6, "tries before a delivery is given up", min=1
)
NOTIFY_SEND_TIMEOUT = env.number(
    "NOTIFY_SEND_TIMEOUT",
    5.0,
    "seconds a webhook call waits for each read of the answer",
    positive=True,
)
NOTIFY_CONNECT_TIMEOUT = env.number(
    "NOTIFY_CONNECT_TIMEOUT", 3.0, "seconds a webhook call may take to connect", positive=True
)
# Loopback, private networks, ...: only when listed.
NOTIFY_ALLOWED_TARGETS = env.csv(
    "NOTIFY_ALLOWED_TARGETS",
    "",
    "internal host names or networks webhooks may reach (`mattermost.lab`, `10.20.0.0/16`)",
)
NOTIFY_MAX_CHANNELS = env.integer(
    "NOTIFY_MAX_CHANNELS", 10, "channels one user may have, mail included", min=1
)
# A process of their own (the supervisor's notifications sender).
NOTIFY_SENDER_THREADS = env.integer(
    "NOTIFY_SENDER_THREADS", 4, "threads of the notifications sender", min=1
)
NOTIFY_SENDS_PER_USER = env.integer(
    "NOTIFY_SENDS_PER_USER", 2, "sends at once for one user's channels", min=1
)
# The sender is not keeping up, or not running.
NOTIFY_BACKLOG_SECONDS = env.integer(
    "NOTIFY_BACKLOG_SECONDS", 300, "`/healthz` fails when a delivery has been due this long", min=1
)

# SMTP once EMAIL_HOST is set; until then each message is a file under EMAIL_FILE_PATH that
# the admin can open (never the console, where it drowned the problems).
EMAIL_HOST = env.text("EMAIL_HOST", "localhost", "SMTP server")
EMAIL_BACKEND = env.text(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if env.given("EMAIL_HOST")
    else "django.core.mail.backends.filebased.EmailBackend",
    "a Django mail backend (dotted path)",
    shown="SMTP when `EMAIL_HOST` is set, else files",
)
EMAIL_FILE_PATH = env.path(
    "EMAIL_FILE_PATH",
    HIVE_DATA_DIR / "mail",
    "where the file backend writes messages",
    shown="`HIVE_DATA_DIR/mail`",
)
DEFAULT_FROM_EMAIL = env.text("DEFAULT_FROM_EMAIL", "gpuhive@localhost", "the sender of mails")
EMAIL_PORT = env.integer("EMAIL_PORT", 25, "SMTP port", min=1, max=65535)
EMAIL_HOST_USER = env.text("EMAIL_HOST_USER", "", "SMTP user; without one no login is tried")
EMAIL_HOST_PASSWORD = env.text("EMAIL_HOST_PASSWORD", "", "SMTP password")
EMAIL_USE_TLS = env.boolean("EMAIL_USE_TLS", False, "STARTTLS on the SMTP connection")
EMAIL_USE_SSL = env.boolean("EMAIL_USE_SSL", False, "SMTP over TLS from the start")
EMAIL_TIMEOUT = env.integer("EMAIL_TIMEOUT", 10, "seconds an SMTP connection may take", min=1)

# === Checked, then written ================================================================

# A bad value stops the start here, before anything is written.
env.check()


# Files the service writes are its own: the data dir 0700, the secret key and SSH key 0600
# where they are written, the SQLite file 0600 before SQLite creates it 0644 (its -wal and
# -shm files take the database file's mode).
def _persisted_secret_key() -> str:
    """Generated once and kept in the data dir."""
    path = HIVE_DATA_DIR / "secret_key"
    if not path.exists():
        HIVE_DATA_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


def _private_files() -> None:
    HIVE_DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    if HIVE_DATA_DIR.stat().st_uid == os.getuid():
        HIVE_DATA_DIR.chmod(0o700)
    database = DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3") and str(database["NAME"]) != ":memory:":
        os.close(os.open(database["NAME"], os.O_WRONLY | os.O_CREAT, 0o600))
        if os.stat(database["NAME"]).st_uid == os.getuid():
            os.chmod(database["NAME"], 0o600)


SECRET_KEY = SECRET_KEY or _persisted_secret_key()
_private_files()
