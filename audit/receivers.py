"""Audit entries for actions made in code that does not call audit.log.record itself.

Connected in AuditConfig.ready. Grants and bans are edited in the admin (model signals);
SSH trouble is noticed by the probing loop, which stores it on Host.status (a change into
"host key changed" or "authentication failed" is logged once, not on every cycle); sign-ins
come from django.contrib.auth's signals.
"""

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save
from django.dispatch import receiver

from accesscontrol.models import Ban, Grant, RunAsAllowance
from apitokens.limits import client_address
from monitoring.models import Host

from .context import current_actor
from .log import record

GRANT_FIELDS = ["name", "scope", "valid_from", "valid_until", "note"]
SSH_ALARMS = {
    Host.Status.HOST_KEY_CHANGED: "host.key_changed",
    Host.Status.AUTH_FAILED: "host.ssh_login_failed",
}


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


@receiver(pre_save, sender=Host)
def notice_ssh_alarm(sender, instance, raw=False, **kwargs):
    """Mark a change into an SSH alarm state; only then is the stored status read."""
    instance._audit_alarm = None
    if raw or instance.status not in SSH_ALARMS or not instance.pk:
        return
    stored = Host.objects.filter(pk=instance.pk).values_list("status", flat=True).first()
    if stored != instance.status:
        instance._audit_alarm = SSH_ALARMS[instance.status]


@receiver(post_save, sender=Host)
def record_ssh_alarm(sender, instance, **kwargs):
    action = getattr(instance, "_audit_alarm", None)
    if action:
        detail = {"address": f"{instance.address}:{instance.port}", "error": instance.last_error}
        if action == "host.key_changed":
            detail["recorded_fingerprint"] = instance.host_key_fingerprint
        record(action, target=instance, **detail)


@receiver(user_logged_in)
def admin_logged_in(sender, request, user, **kwargs):
    """Staff sign-ins only: they can change who may do what (users' are too many to log)."""
    if user.is_staff or user.is_superuser:
        record("admin.login", actor=user, target=user, **_client(request))


@receiver(user_login_failed)
def login_failed(sender, credentials, request=None, **kwargs):
    # Only the name tried: the credentials also hold the (masked) password.
    username = str(credentials.get("username", ""))[:150]
    record("login.failed", target=username, username=username, **_client(request))


def _client(request) -> dict:
    """Where a sign-in came from: the one address limits and logs use (apitokens.limits)."""
    if request is None:
        return {}
    return {"address": client_address(request)}
