"""One row per security-relevant action; rows are only ever added."""

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    time = models.DateTimeField(auto_now_add=True, db_index=True)
    # Kept when the user is deleted: the name at the time stays readable in `actor_name`.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="'system' for tasks.")
    action = models.CharField(max_length=64, db_index=True, help_text="e.g. grant.changed")
    target = models.CharField(max_length=255, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-time", "-id"]

    def __str__(self):
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.target}"
