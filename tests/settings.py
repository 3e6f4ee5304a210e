"""The service's settings, with what only tests may change.

Production hashes passwords with Django's default PBKDF2 at its full work factor (0.3-0.5 s
per user on the CI machine). The suite creates over a thousand users, so it hashes with MD5;
tests about hashing ask for the production hashers with the ``production_hashers`` fixture.
"""

import os

from django.conf import global_settings

from hiveproject.settings import *  # noqa: F403

PRODUCTION_PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Each test process keeps its own counters, cleared before every test (tests/conftest.py);
# tests of counters shared by several web processes set HIVE_SHARED_CACHE=1 for those.
if not os.environ.get("HIVE_SHARED_CACHE"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Fair-share factors are computed afresh each time: tests change usage between rounds.
QUEUE_FAIRSHARE_CACHE_SECONDS = 0
