"""Operations on access control, as plain functions (each atomic) for commands, pages, API."""

from datetime import date, datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group, User
from django.db import transaction
from guardian.conf import settings as guardian_settings
from guardian.shortcuts import assign_perm, remove_perm

from monitoring.models import Host

from .models import Ban, Grant, Profile

DEFAULT_GROUP_NAME = "everyone"
DEFAULT_GRANT_NAME = "everyone may use everything"
# Host admins get these object permissions on their hosts (see accesscontrol.permissions).
HOST_ADMIN_PERMS = ("monitoring.view_host", "monitoring.change_host")


def is_service_account(user: AbstractBaseUser) -> bool:
    """django-guardian's stand-in for anonymous visitors: never a member, never granted."""
    return is_service_account_name(user.get_username())


def is_service_account_name(username: str) -> bool:
    """``username`` names that stand-in (a directory or provider must never sign in as it)."""
    anonymous: str = guardian_settings.ANONYMOUS_USER_NAME
    return username.casefold() == anonymous.casefold()


def profile_for(user: User) -> Profile:
    """The user's profile, created on first need (users made before this app have none).

    A new profile names no UNIX account: the web user name is not one (an admin who creates
    web user ``postgres`` would otherwise hand out that account). Admins map accounts
    explicitly; self-sign-up maps the account it proved on the host it proved it on.
    """
    profile, _ = Profile.objects.get_or_create(user=user)
    return profile


@transaction.atomic
def ensure_default_group() -> Group:
    """Create the group 'everyone', its 'may use everything' grant, and fill it; idempotent.

    Like TensorHive's init. Users created later join the group on their own (see
    ``receivers.give_new_user_a_profile``) as long as it exists; delete or rename it to stop.
    """
    group, _ = Group.objects.get_or_create(name=DEFAULT_GROUP_NAME)
    grant = Grant.objects.filter(name=DEFAULT_GRANT_NAME, groups=group).first()
    if grant is None:
        grant = Grant.objects.create(
            name=DEFAULT_GRANT_NAME, scope=Grant.Scope.ALL, valid_from=date(2000, 1, 1)
        )
        grant.groups.add(group)
    users = get_user_model().objects.exclude(groups=group)
    group.user_set.add(*[u for u in users if not is_service_account(u)])
    return group


@transaction.atomic
def ban_user(user: User, reason: str, until: datetime | None = None, by: User | None = None) -> Ban:
    """Ban ``user`` from now on; takes effect at the next access check (accesscontrol.changes)."""
    return Ban.objects.create(user=user, reason=reason, until=until, created_by=by)


@transaction.atomic
def lift_bans(user: User) -> int:
    """Lift every ban of ``user`` (deleting them announces the change)."""
    bans = list(Ban.objects.filter(user=user))
    for ban in bans:
        ban.delete()
    return len(bans)


@transaction.atomic
def make_host_admin(user: User, host: Host) -> None:
    """Let a non-superuser view and manage one host (in the admin too, hence is_staff)."""
    for perm in HOST_ADMIN_PERMS:
        assign_perm(perm, user, host)
    if not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])


@transaction.atomic
def remove_host_admin(user: User, host: Host) -> None:
    for perm in HOST_ADMIN_PERMS:
        remove_perm(perm, user, host)
