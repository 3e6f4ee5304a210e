"""Sign in with the lab's directory (LDAP): its entry names the user's UNIX account.

django-auth-ldap checks the password (a bind as the user, at the DN a search with the
service's bind DN found or a template made), copies name and mail, and mirrors the
directory's groups into ours, leaving HIVE_DIRECTORY_LOCAL_GROUPS as they are. This backend
then takes the UNIX name from the entry (posixAccount's ``uid``, or the attribute the lab
names) as the profile's usual account, so work runs as it on every host without a per-host
mapping; an account an admin set for one host still wins there (Profile.unix_username_for).
A name the run-as rules refuse (root, UIDs below RUN_AS_MIN_UID, a host's monitoring account,
the service's own: accesscontrol.accounts) never becomes anyone's, whatever the directory says.

A directory that cannot be reached (or refuses the service's bind) makes the sign-in say so
(DirectoryUnavailable: the form's error, a 400 in the API) instead of "wrong password".
Local accounts are tried first (settings: ModelBackend before this one), so they still sign in.
"""

import logging

import ldap
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.dispatch import receiver
from django_auth_ldap.backend import LDAPBackend, ldap_error

from .accounts import directory_refusal
from .models import Profile
from .services import is_service_account_name, profile_for

logger = logging.getLogger(__name__)

# django-auth-ldap's contexts of an LDAPError met while someone signs in.
SIGN_IN_CONTEXTS = {"authenticate", "search_for_user_dn", "mirror_groups"}
UNREACHABLE = (ldap.SERVER_DOWN, ldap.TIMEOUT, ldap.CONNECT_ERROR)


class DirectoryUnavailable(ValidationError):
    """The directory could not answer a sign-in; the message says so (never a 500)."""

    def __init__(self, message: str):
        super().__init__(message, code="unavailable")


def take_unix_name(user, name: str, uid: int | None, source: str) -> None:
    """Make ``name`` (as ``source`` says, with UID ``uid`` if it says one) ``user``'s UNIX
    account on every host; a name the run-as rules refuse clears it instead: the source is
    the authority on who the user is, so an account it named before is not theirs now."""
    why = name and (directory_refusal(name, uid) or _invalid(name))
    if why:
        logger.warning("%s names %s's UNIX account %r: refused, %s", source, user, name, why)
        name = ""
    profile = profile_for(user)
    if profile.unix_username != name:
        profile.unix_username = name
        profile.save(update_fields=["unix_username"])


def _invalid(name: str) -> str:
    try:
        Profile._meta.get_field("unix_username").clean(name, None)
    except ValidationError as exc:
        return "; ".join(exc.messages)
    return ""


def mirror_groups(user, names) -> None:
    """``user``'s groups become ``names`` (created when new), except the local groups
    (HIVE_DIRECTORY_LOCAL_GROUPS), which the user keeps or stays out of as before."""
    local = set(settings.HIVE_DIRECTORY_LOCAL_GROUPS)
    kept = set(user.groups.filter(name__in=local).values_list("name", flat=True))
    wanted = (set(names) - local) | kept
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in sorted(wanted)])


class DirectoryBackend(LDAPBackend):
    """django-auth-ldap's backend (settings AUTH_LDAP_*), which also takes the entry's UNIX
    name (HIVE_LDAP_UNIX_NAME_ATTR; its UID: HIVE_LDAP_UID_NUMBER_ATTR) for the profile."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None or is_service_account_name(username):
            return None
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and user.ldap_user.attrs is not None:
            self._take_unix_name(user, user.ldap_user.attrs)
        return user

    def _take_unix_name(self, user, attrs) -> None:
        names = attrs.get(settings.HIVE_LDAP_UNIX_NAME_ATTR)
        if not names:  # no posixAccount: an admin maps the account, as for local users
            return
        name, uids = names[0], attrs.get(settings.HIVE_LDAP_UID_NUMBER_ATTR)
        try:
            uid = int(uids[0]) if uids else None
        except ValueError:
            logger.warning("the directory gives %s the UID %r: not a number", user, uids[0])
            name, uid = "", None  # what it says cannot be checked: no account
        take_unix_name(user, name, uid, "the directory")


@receiver(ldap_error)
def _say_the_directory_failed(sender, context, exception, **kwargs):
    """An LDAPError while someone signs in: fail with what happened, not "wrong password".
    (django-auth-ldap lets what this raises out; other contexts keep its logging.)"""
    if not issubclass(sender, DirectoryBackend) or context not in SIGN_IN_CONTEXTS:
        return
    if isinstance(exception, UNREACHABLE):
        raise DirectoryUnavailable(
            "The lab's directory could not be reached, so only local accounts can sign in "
            "now. Try again in a few minutes; tell an admin if it goes on."
        )
    said = exception.args[0] if exception.args and isinstance(exception.args[0], dict) else {}
    detail = said.get("desc", "")
    raise DirectoryUnavailable(
        f"The lab's directory answered with an error ({detail or type(exception).__name__}): "
        "signing in with it does not work now. Tell an admin."
    )
