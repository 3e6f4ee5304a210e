"""Audit entries for SSH trouble, which the probing loop stores on Host.status: a change into
"host key changed" or "authentication failed" is logged once, not on every cycle (connected
in MonitoringConfig.ready)."""

from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from audit.log import record

from .models import Host

SSH_ALARMS = {
    Host.Status.HOST_KEY_CHANGED: "host.key_changed",
    Host.Status.AUTH_FAILED: "host.ssh_login_failed",
}


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
