"""Turn model changes into ``grants_changed`` announcements, and give new users a profile.

Connected in ``AccesscontrolConfig.ready``. Membership is read before a removal or clear,
so users who lose access are announced as well as those who gain it.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete
from django.dispatch import receiver

from .models import Ban, Grant, Window
from .services import DEFAULT_GROUP_NAME, is_service_account, profile_for
from .signals import announce

User = get_user_model()


def members(group_ids) -> set[int]:
    return set(User.objects.filter(groups__in=group_ids).values_list("pk", flat=True))


def audience(grant_ids) -> set[int]:
    """Users a set of grants applies to: named directly or through a group."""
    direct = User.objects.filter(access_grants__in=grant_ids).values_list("pk", flat=True)
    group_ids = Grant.groups.through.objects.filter(grant_id__in=grant_ids).values("group_id")
    return set(direct) | members(group_ids)


@receiver(post_save, sender=User)
def give_new_user_a_profile(sender, instance, created, raw=False, **kwargs):
    """Every user has a profile; new users join the default group when one exists."""
    if not created or raw or is_service_account(instance):
        return
    profile_for(instance)
    default_group = Group.objects.filter(name=DEFAULT_GROUP_NAME).first()
    if default_group:
        instance.groups.add(default_group)


@receiver(post_save, sender=Grant)
def grant_saved(sender, instance, created, raw=False, **kwargs):
    if not raw:
        announce(Grant, audience([instance.pk]), f"the grant '{instance}' changed")


@receiver(pre_delete, sender=Grant)
def grant_deleted(sender, instance, **kwargs):
    announce(Grant, audience([instance.pk]), f"the grant '{instance}' was deleted")


@receiver([post_save, post_delete], sender=Window)
def window_changed(sender, instance, raw=False, **kwargs):
    if not raw:
        announce(Window, audience([instance.grant_id]), "the weekly windows of a grant changed")


def _touched_grants(instance, reverse, pk_set) -> set[int]:
    """Grants touched by an m2m change, seen from either side (pk_set is None on clear)."""
    if not reverse:
        return {instance.pk}
    if pk_set is not None:
        return set(pk_set)
    return set(instance.access_grants.values_list("pk", flat=True))


def _named_users(field, instance, reverse, pk_set) -> set[int]:
    """Users named by the change itself, who may no longer be in the grant's audience."""
    if field == "users":
        return {instance.pk} if reverse else set(pk_set or ())
    if field == "groups":
        return members([instance.pk] if reverse else (pk_set or ()))
    return set()


def _grant_m2m_changed(field):
    def handler(sender, instance, action, reverse, pk_set, **kwargs):
        if action not in ("post_add", "post_remove", "pre_clear"):
            return
        pk_set = None if action == "pre_clear" else pk_set
        affected = audience(_touched_grants(instance, reverse, pk_set))
        affected |= _named_users(field, instance, reverse, pk_set)
        announce(Grant, affected, f"the {field} of a grant changed")

    return handler


for _field in ("users", "groups", "hosts", "devices"):
    m2m_changed.connect(
        _grant_m2m_changed(_field),
        sender=getattr(Grant, _field).through,
        weak=False,
        dispatch_uid=f"accesscontrol-grant-{_field}",
    )


@receiver(m2m_changed, sender=User.groups.through)
def membership_changed(sender, instance, action, reverse, pk_set, **kwargs):
    """A user joined or left a group: only matters when the group has grants."""
    if action not in ("post_add", "post_remove", "pre_clear"):
        return
    if reverse:  # group.user_set changed
        user_ids = set(pk_set) if pk_set is not None else members([instance.pk])
        group_ids = [instance.pk]
    else:  # user.groups changed
        user_ids = {instance.pk}
        group_ids = pk_set if pk_set is not None else instance.groups.values("pk")
    if Grant.objects.filter(groups__in=group_ids).exists():
        announce(Group, user_ids, "a group membership changed")


@receiver(pre_delete, sender=Group)
def group_deleted(sender, instance, **kwargs):
    if instance.access_grants.exists():
        announce(Group, members([instance.pk]), f"the group '{instance}' was deleted")


@receiver([post_save, post_delete], sender=Ban)
def ban_changed(sender, instance, raw=False, **kwargs):
    if not raw:
        announce(Ban, {instance.user_id}, f"a ban changed: {instance.reason}")
