"""Who is asking (the client's address), and attempts counted in the shared cache.

The address is decided once, here, for sign-in limits, sign-up and reset-mail limits, audit
entries and DRF's throttles. It is DRF's rule (``BaseThrottle.get_ident``) with
``NUM_PROXIES`` always set: 0 (no proxy) takes the socket's address; N takes the N-th
address from the right of ``X-Forwarded-For``, the one our own nearest proxy wrote, so
whatever a client put in the header itself is never believed. nginx overwrites the header
with ``$remote_addr`` anyway (deploy/nginx/gpuhive.conf), and daphne runs without
``--proxy-headers`` (which would take the *first*, client-chosen, address).

Counters live in Django's cache, which settings point at the database (embedded profile)
or Redis (production), so every web process counts the same attempts.
"""

import functools
import hashlib
import logging
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


def _open_if_the_cache_fails(default: R) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Redis gone must not take sign-in down with it (pages and the API keep serving, see
    tests/faults): the limit is skipped and the failure logged, until Redis is back."""

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return method(*args, **kwargs)
            except Exception as exc:  # the backend's own errors (redis.ConnectionError...)
                log.warning("limit %s skipped: the shared cache failed: %s", method.__name__, exc)
                return default

        return wrapper

    return decorate


def client_address(request: HttpRequest | Request) -> str:
    """The address of whoever sent ``request`` (see the module doc)."""
    # get_ident reads only .headers and .META, which a Django request has as DRF's does.
    return BaseThrottle().get_ident(request) or ""  # type: ignore[arg-type]


def _key(scope: str, *parts: str) -> str:
    # Hashed: names and addresses are user input, and cache keys have a length and alphabet.
    raw = "|".join(parts).encode()
    return f"limit:{scope}:" + hashlib.sha256(raw).hexdigest()


class Limit:
    """At most ``attempts`` within ``window`` seconds, counted per key of one scope."""

    def __init__(self, scope: str, attempts: int, window: int) -> None:
        self.scope, self.attempts, self.window = scope, attempts, window

    @_open_if_the_cache_fails(0)
    def wait(self, *parts: str) -> int:
        """Seconds until this key may try again (0: it may now)."""
        key = _key(self.scope, *parts)
        if (cache.get(key) or 0) < self.attempts:
            return 0
        first = cache.get(key + ":since") or time.time()
        return max(1, int(self.window - (time.time() - first)))

    @_open_if_the_cache_fails(None)
    def note(self, *parts: str) -> None:
        """Count one attempt (the window starts at the first one)."""
        key = _key(self.scope, *parts)
        cache.add(key + ":since", time.time(), self.window)
        cache.add(key, 0, self.window)
        try:
            cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.set(key, 1, self.window)

    def take(self, *parts: str) -> int:
        """Count an attempt unless the key is already at its limit; return the wait (0: go)."""
        wait = self.wait(*parts)
        if not wait:
            self.note(*parts)
        return wait

    @_open_if_the_cache_fails(None)
    def clear(self, *parts: str) -> None:
        key = _key(self.scope, *parts)
        cache.delete_many([key, key + ":since"])


def wait_text(seconds: int) -> str:
    minutes = -(-seconds // 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"
