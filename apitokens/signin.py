"""Failed password sign-ins are limited per user name and address, per address, and on the
whole site, without ever locking out someone who has not failed.

``SignInLimit`` sits first in AUTHENTICATION_BACKENDS, so the login form, the admin's login,
the browsable API's login and ``POST /api/tokens/login/`` all stop checking passwords once
a limit is reached within LOGIN_ATTEMPT_WINDOW seconds:

- LOGIN_ATTEMPTS failures for one name from one address (guessing one password). Keyed on
  the name *and* the address, as django-axes' ``[["username", "ip_address"]]`` lockouts are,
  so a stranger cannot lock the owner out everywhere;
- LOGIN_ADDRESS_ATTEMPTS failures from one address, whatever the names (password spraying:
  many names, one password);
- LOGIN_SITE_ATTEMPTS failures on the whole site (spraying from many addresses) is a brake,
  not a lock: while it holds, an address is refused once it has failed
  LOGIN_BRAKE_ADDRESS_ATTEMPTS times, so each attacking address gets a few guesses instead of
  LOGIN_ADDRESS_ATTEMPTS, and an address with fewer failures (the innocent) still signs in.

A failure counts once, when a password was checked and was wrong. An attempt refused by a
limit checks no password, so it counts nothing: the admin's form, which asks every backend
and hears the refusal as a failed sign-in (``user_login_failed``), cannot push one address's
flood into the site's count.

The address is ``limits.client_address`` (the proxy's view, never a forged header); counts
live in the shared cache, so several web processes count together. A successful sign-in
clears only its own name-and-address count: signing in to one's own account must not reset
what an attacker's address has used up.
"""

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.backends import BaseBackend, ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.exceptions import PermissionDenied, ValidationError
from django.dispatch import receiver

from core.clients import Limit, client_address, wait_text

BRAKED = "on this site, and from your address"


def _limits(request, username: str) -> list[tuple[Limit, tuple[str, ...], str]]:
    """(limit, key parts, whose tries it counts) for a sign-in as ``username``."""
    address, window = client_address(request), settings.LOGIN_ATTEMPT_WINDOW
    return [
        (
            Limit("signin-name", settings.LOGIN_ATTEMPTS, window),
            (username.casefold(), address),
            "for this user name from your address",
        ),
        (
            Limit("signin-address", settings.LOGIN_ADDRESS_ATTEMPTS, window),
            (address,),
            "from your address",
        ),
        (Limit("signin-site", settings.LOGIN_SITE_ATTEMPTS, window), (), "on this site"),
    ]


def _brake_wait(request) -> int:
    """Seconds this address waits under the site-wide brake (0: not braked, or it may try).

    The address's own failures are the ``signin-address`` count, held here to a lower bar.
    """
    window = settings.LOGIN_ATTEMPT_WINDOW
    site = Limit("signin-site", settings.LOGIN_SITE_ATTEMPTS, window).wait()
    if not site:
        return 0
    address = Limit("signin-address", settings.LOGIN_BRAKE_ADDRESS_ATTEMPTS, window)
    own = address.wait(client_address(request))
    return min(site, own) if own else 0


def wait_seconds(request, username: str | None) -> int:
    """Seconds until this name may try again from this address (0: it may now)."""
    return _wait(request, username)[0]


def _wait(request, username: str | None) -> tuple[int, str]:
    if request is None or not username:
        return 0, ""
    name_and_address, address, _site = _limits(request, username)  # the site's: a brake
    for limit, parts, whose in (name_and_address, address):
        wait = limit.wait(*parts)
        if wait:
            return wait, whose
    wait = _brake_wait(request)
    return (wait, BRAKED) if wait else (0, "")


def wait_message(seconds: int, whose: str = "for this user name from your address") -> str:
    return f"Too many failed sign-ins {whose}. Try again in {wait_text(seconds)}."


def locked_message(request, username: str | None) -> str:
    """The message for a locked sign-in ("" if none of the limits is reached)."""
    wait, whose = _wait(request, username)
    return wait_message(wait, whose) if wait else ""


def note_failure(request, username: str | None) -> None:
    if request is None or not username:
        return
    for limit, parts, _ in _limits(request, username):
        limit.note(*parts)


def clear(request, username: str) -> None:
    if request is not None:
        limit, parts, _ = _limits(request, username)[0]
        limit.clear(*parts)


class SignInLimit(BaseBackend):
    """Refuses every password check for a locked name and address (see the module doc)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        message = locked_message(request, username)
        if message:
            raise PermissionDenied(message)
        return None  # not locked: the next backend checks the password

    def get_user(self, user_id):
        # login() without a backend (force_login, sign-up) records the first one: this.
        return ModelBackend().get_user(user_id)


class LockedSaysSo:
    """A login form mixin saying plainly when a name is locked instead of "wrong password"."""

    throttled = False

    @property
    def says_why(self) -> bool:
        """Its error says why signing in failed (a limit, the directory down): show it."""
        errors = self.non_field_errors().as_data()
        return self.throttled or any(error.code == "unavailable" for error in errors)

    def clean(self):
        message = locked_message(self.request, self.cleaned_data.get("username"))
        if message:
            self.throttled = True
            raise ValidationError(message, code="throttled")
        return super().clean()


class SignInForm(LockedSaysSo, AuthenticationForm):
    """The site's login form."""


class AdminSignInForm(LockedSaysSo, AdminAuthenticationForm):
    """The admin's login form (``AdminSite.login_form``)."""


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs):
    # Django sends this also when SignInLimit refused the attempt: no password was checked
    # then, and counting it would let refused floods fill the site-wide count.
    username = credentials.get("username")
    if not wait_seconds(request, username):
        note_failure(request, username)


@receiver(user_logged_in)
def _clear_failures(sender, request, user, **kwargs):
    clear(request, user.get_username())
