"""Default group, profiles, bans and host admins."""

from datetime import timedelta
from importlib import import_module

from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.utils import timezone
from guardian.shortcuts import get_anonymous_user

from accesscontrol.coverage import active_ban, check_access
from accesscontrol.models import Grant, HostAccount, Profile
from accesscontrol.permissions import managed_hosts
from accesscontrol.services import (
    DEFAULT_GROUP_NAME,
    ban_user,
    ensure_default_group,
    lift_bans,
    make_host_admin,
    profile_for,
    remove_host_admin,
)

from .conftest import utc

User = get_user_model()


def test_it_creates_the_default_group_once_with_everyone_in_it(owner, other_user, gpu):
    first = ensure_default_group()
    second = ensure_default_group()
    assert first == second
    assert set(first.user_set.all()) == {owner, other_user}
    assert Grant.objects.filter(groups=first).count() == 1
    assert check_access(owner, gpu, utc(2030, 1, 1), utc(2030, 1, 2)).allowed
    assert not first.user_set.filter(pk=get_anonymous_user().pk).exists()


def test_it_puts_new_users_in_the_default_group(db):
    ensure_default_group()
    newcomer = User.objects.create_user("newcomer")
    assert newcomer.groups.filter(name=DEFAULT_GROUP_NAME).exists()


def test_it_leaves_new_users_groupless_without_a_default_group(db):
    assert not User.objects.create_user("newcomer").groups.exists()


def test_it_gives_every_new_user_a_profile_without_a_unix_account(owner, node1):
    # A web user name never implies a UNIX account: web user "postgres" must not get it.
    postgres = User.objects.create_user("postgres")
    assert postgres.profile.unix_username == ""
    assert postgres.profile.unix_username_for(node1) == ""
    assert owner.profile.unix_username_for(node1) == ""


def test_it_gives_users_from_before_the_app_a_profile_when_migrating(owner, other_user):
    migration = import_module("accesscontrol.migrations.0002_profiles_for_existing_users")
    Profile.objects.filter(user=owner).delete()
    migration.create_profiles(django_apps, None)
    assert Profile.objects.get(user=owner).unix_username == "owner"
    assert Profile.objects.filter(user=other_user).count() == 1


def test_it_uses_a_per_host_unix_name_where_one_is_set(owner, node1, node2):
    profile = profile_for(owner)
    profile.unix_username = "owner"
    profile.save()
    HostAccount.objects.create(profile=profile, host=node2, unix_username="owner2")
    profile = Profile.objects.get(pk=profile.pk)
    assert profile.unix_username_for(node1) == "owner"
    assert profile.unix_username_for(node2) == "owner2"


def test_it_bans_until_a_time_and_lifts(owner):
    soon = timezone.now() + timedelta(hours=1)
    ban = ban_user(owner, "misuse", until=soon)
    assert active_ban(owner) == ban
    assert active_ban(owner, at=soon) is None
    assert lift_bans(owner) == 1
    assert active_ban(owner) is None


def test_it_prefers_the_longest_ban(owner):
    ban_user(owner, "short", until=timezone.now() + timedelta(hours=1))
    forever = ban_user(owner, "for good")
    assert active_ban(owner) == forever


def test_it_makes_and_unmakes_host_admins(other_user, node1, node2):
    make_host_admin(other_user, node1)
    other_user = User.objects.get(pk=other_user.pk)
    assert other_user.is_staff and list(managed_hosts(other_user)) == [node1]
    remove_host_admin(other_user, node1)
    assert not managed_hosts(User.objects.get(pk=other_user.pk)).exists()
