"""Audit entries for grants, bans and run-as allowances, which admins edit in the admin:
model signals, so no edit goes unrecorded whatever path made it (connected in
AccesscontrolConfig.ready)."""

from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save
from django.dispatch import receiver

from audit.context import current_actor
from audit.log import record

from .models import Ban, Grant, RunAsAllowance

GRANT_FIELDS = ["name", "scope", "valid_from", "valid_until", "note"]


def _jsonable(value):
    """Dates and choices as their text; numbers, booleans and None as they are."""
    return value if value is None or isinstance(value, int | bool) else str(value)


@receiver(pre_save, sender=Grant)
def remember_grant(sender, instance, raw=False, **kwargs):
    """Keep the stored values, so the entry can say what an edit changed."""
    stored = Grant.objects.filter(pk=instance.pk).values(*GRANT_FIELDS)
    instance._audit_before = stored.first() if instance.pk else None


@receiver(post_save, sender=Grant)
def grant_saved(sender, instance, created, raw=False, **kwargs):
    if raw:
        return
    before = getattr(instance, "_audit_before", None) or {}
    changes = {
        field: [_jsonable(before.get(field)), _jsonable(getattr(instance, field))]
        for field in GRANT_FIELDS
        if created or before.get(field) != getattr(instance, field)
    }
    action = "grant.created" if created else "grant.changed"
    record(action, actor=current_actor(), target=instance, grant=instance.pk, changes=changes)


@receiver(post_delete, sender=Grant)
def grant_deleted(sender, instance, **kwargs):
    record("grant.deleted", actor=current_actor(), target=instance, grant=instance.pk)


def _grant_members_changed(field):
    """Who or what a grant applies to changed (seen from the grant's side or the other)."""

    def handler(sender, instance, action, reverse, pk_set, **kwargs):
        if action not in ("post_add", "post_remove", "pre_clear"):
            return
        verb = {"post_add": "added", "post_remove": "removed", "pre_clear": "cleared"}[action]
        ids = sorted(pk_set or ())
        if reverse:  # e.g. user.access_grants.add(grant): the grants are in pk_set
            detail = {field: [instance.pk], "grants": ids}
        else:
            detail = {field: ids, "grants": [instance.pk]}
        target = instance if not reverse else f"{field[:-1]} {instance}"
        record(f"grant.{field}_{verb}", actor=current_actor(), target=target, **detail)

    return handler


for _field in ("users", "groups", "hosts", "devices"):
    m2m_changed.connect(
        _grant_members_changed(_field),
        sender=getattr(Grant, _field).through,
        weak=False,
        dispatch_uid=f"audit-grant-{_field}",
    )


@receiver(post_save, sender=Ban)
def ban_saved(sender, instance, created, raw=False, **kwargs):
    if raw:
        return
    actor = current_actor() or (instance.created_by if created else None)
    record(
        "user.banned" if created else "ban.changed",
        actor=actor,
        target=instance.user,
        reason=instance.reason,
        starts=instance.created.isoformat(),
        until=instance.until.isoformat() if instance.until else None,
    )


@receiver(post_delete, sender=Ban)
def ban_lifted(sender, instance, **kwargs):
    record("ban.lifted", actor=current_actor(), target=instance.user, reason=instance.reason)


@receiver(post_save, sender=RunAsAllowance)
def run_as_allowed(sender, instance, created, raw=False, **kwargs):
    if raw:
        return
    actor = current_actor() or instance.created_by
    host = instance.host.name if instance.host else None
    action = "run_as.allowed" if created else "run_as.allowance_changed"
    record(action, actor=actor, target=instance, host=host, reason=instance.reason)


@receiver(post_delete, sender=RunAsAllowance)
def run_as_disallowed(sender, instance, **kwargs):
    host = instance.host.name if instance.host_id else None
    record("run_as.allowance_removed", actor=current_actor(), target=instance, host=host)
