"""One day of one GPU, per person it is charged to: the rows every report sums."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from monitoring.models import Device


class DailyUsage(models.Model):
    """What one GPU did for one user on one day (site time zone), from history and bookings.

    ``user`` is None for time and energy nobody is charged for (no booking, no job).
    What each figure means, and the invariants between them: accounting.rollup.
    Rewritten whole by accounting.rollup.compute_day, so a recomputation never double counts.
    """

    day = models.DateField()
    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.CASCADE, related_name="+"
    )
    reserved_seconds = models.FloatField(default=0, help_text="Held by the user's bookings.")
    unbooked_seconds = models.FloatField(
        default=0, help_text="Held by the user's tasks outside any booking."
    )
    used_seconds = models.FloatField(default=0, help_text="Load at or above the idle threshold.")
    idle_seconds = models.FloatField(default=0, help_text="Booked, but under the threshold.")
    energy_wh = models.FloatField(default=0, help_text="Integrated power draw.")

    class Meta:
        indexes = [models.Index(fields=["day"])]
        constraints = [
            models.UniqueConstraint(
                fields=["day", "device", "user"],
                condition=Q(user__isnull=False),
                name="daily_usage_once",
            ),
            models.UniqueConstraint(
                fields=["day", "device"],
                condition=Q(user__isnull=True),
                name="daily_usage_once_unclaimed",
            ),
        ]

    def __str__(self):
        return f"{self.day} {self.device_id} {self.user_id}"
