"""The service's settings, with what only tests may change.

Production hashes passwords with Django's default PBKDF2 at its full work factor (0.3-0.5 s
per user on the CI machine). The suite creates over a thousand users, so it hashes with MD5;
tests about hashing ask for the production hashers with the ``production_hashers`` fixture.
"""

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.conf import global_settings

# Under pytest-xdist each worker process keeps its own data directory (secret key, SSH key,
# workers' state, SQLite files), as two separate test runs do. Processes a test starts inherit
# the mark and keep the directory the test gives them.
_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and os.environ.get("HIVE_DATA_DIR") and not os.environ.get("HIVE_WORKER_DATA_DIR"):
    _worker_dir = Path(os.environ["HIVE_DATA_DIR"], _worker)
    _worker_dir.mkdir(exist_ok=True)
    os.environ["HIVE_DATA_DIR"] = os.environ["HIVE_WORKER_DATA_DIR"] = str(_worker_dir)
    # And its own Redis database (broker queue, channel groups, shared counters): the next
    # numbers after the run's own, as each worker signs its tasks with its own key.
    if os.environ.get("REDIS_URL"):
        _redis = urlsplit(os.environ["REDIS_URL"])
        _db = int(_redis.path.strip("/") or 0) + 1 + int(_worker.removeprefix("gw"))
        os.environ["REDIS_URL"] = urlunsplit(_redis._replace(path=f"/{_db}"))

from hiveproject.settings import *  # noqa: E402, F403

PRODUCTION_PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Each test process keeps its own counters, cleared before every test (tests/conftest.py);
# tests of counters shared by several web processes set HIVE_SHARED_CACHE=1 for those.
if not os.environ.get("HIVE_SHARED_CACHE"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Fair-share factors are computed afresh each time: tests change usage between rounds.
QUEUE_FAIRSHARE_CACHE_SECONDS = 0
