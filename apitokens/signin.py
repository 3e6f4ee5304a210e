"""Failed password sign-ins are limited per user name and address, wherever they happen.

``SignInLimit`` sits first in AUTHENTICATION_BACKENDS, so the login form, the admin's login,
the browsable API's login and ``POST /api/tokens/login/`` all stop checking passwords for a
name and address after LOGIN_ATTEMPTS failures within LOGIN_ATTEMPT_WINDOW seconds. Counts
live in Django's cache (per process on the embedded profile); a successful sign-in clears
them. Keying on the name *and* the address keeps one attacker from locking a user out
everywhere.
"""

import hashlib
import time

from django.conf import settings
from django.contrib.auth.backends import BaseBackend, ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.dispatch import receiver


def _key(request, username: str) -> str:
    address = request.META.get("REMOTE_ADDR", "")
    raw = f"{username.casefold()}|{address}".encode()
    return "signin-failures:" + hashlib.sha256(raw).hexdigest()


def wait_seconds(request, username: str | None) -> int:
    """Seconds until this name may try again from this address (0: it may now)."""
    if request is None or not username:
        return 0
    key = _key(request, username)
    if (cache.get(key) or 0) < settings.LOGIN_ATTEMPTS:
        return 0
    first = cache.get(key + ":since") or time.time()
    return max(1, int(settings.LOGIN_ATTEMPT_WINDOW - (time.time() - first)))


def wait_message(seconds: int) -> str:
    minutes = -(-seconds // 60)
    return (
        "Too many failed sign-ins for this user name from your address. "
        f"Try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )


def note_failure(request, username: str | None) -> None:
    if request is None or not username:
        return
    key, window = _key(request, username), settings.LOGIN_ATTEMPT_WINDOW
    cache.add(key + ":since", time.time(), window)
    cache.add(key, 0, window)
    try:
        cache.incr(key)
    except ValueError:  # expired between add() and incr()
        cache.set(key, 1, window)


def clear(request, username: str) -> None:
    if request is not None:
        key = _key(request, username)
        cache.delete_many([key, key + ":since"])


class SignInLimit(BaseBackend):
    """Refuses every password check for a locked name and address (see the module doc)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        wait = wait_seconds(request, username)
        if wait:
            raise PermissionDenied(wait_message(wait))
        return None  # not locked: the next backend checks the password

    def get_user(self, user_id):
        # login() without a backend (force_login, sign-up) records the first one: this.
        return ModelBackend().get_user(user_id)


class SignInForm(AuthenticationForm):
    """The login form, saying plainly when a name is locked instead of "wrong password"."""

    throttled = False

    def clean(self):
        wait = wait_seconds(self.request, self.cleaned_data.get("username"))
        if wait:
            self.throttled = True
            raise ValidationError(wait_message(wait), code="throttled")
        return super().clean()


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs):
    note_failure(request, credentials.get("username"))


@receiver(user_logged_in)
def _clear_failures(sender, request, user, **kwargs):
    clear(request, user.get_username())
