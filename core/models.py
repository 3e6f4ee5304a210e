"""The service's own rows, not any app's: background activities (leases and health)."""

from django.db import models


class Activity(models.Model):
    """A background activity's lease and health, shown in the admin.

    The probing loop holds the row named ``probe-loop`` as a lease: only the holder whose
    lease has not expired may probe, so exactly one loop runs cluster-wide. Every activity
    records its last success and its last failure here, so nothing dies silently.
    """

    name = models.SlugField(max_length=50, unique=True)
    holder = models.CharField(max_length=100, blank=True, help_text="Who holds the lease.")
    lease_expires = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_summary = models.CharField(max_length=255, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        # The table was created when the model was monitoring's: its rows outlived the move.
        db_table = "monitoring_activity"
        verbose_name_plural = "activities"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
