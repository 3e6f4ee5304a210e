"""Reservations: GPUs booked in advance by one user, for exclusive use over [start, end)."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from monitoring.models import Device


class Reservation(models.Model):
    """One booking of one or more GPUs (possibly on several hosts), handled as one unit."""

    class Status(models.TextChoices):
        PENDING = "pending", "Awaiting approval"
        CONFIRMED = "confirmed", "Confirmed"
        CANCELLED = "cancelled", "Cancelled"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reservations"
    )
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    devices = models.ManyToManyField(Device, through="ReservedDevice", related_name="reservations")
    start = models.DateTimeField()
    end = models.DateTimeField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CONFIRMED)
    # Why the service changed it (e.g. cancelled because a grant ended); shown to the owner.
    note = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["start"]
        indexes = [models.Index(fields=["start", "end"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(end__gt=F("start")), name="reservation_ends_after_start"
            ),
        ]

    def __str__(self):
        return f"{self.title} ({self.owner})"

    @property
    def holds_devices(self) -> bool:
        return self.status != self.Status.CANCELLED


class ReservedDevice(models.Model):
    """One GPU of a reservation, with the reservation's time range copied onto it.

    This is the row the database keeps exclusive: an exclusion constraint (PostgreSQL) or
    triggers (SQLite) refuse two holding rows for one device whose ranges overlap, whatever
    code path writes them. See migration 0002.
    """

    reservation = models.ForeignKey(Reservation, on_delete=models.CASCADE, related_name="slots")
    device = models.ForeignKey(Device, on_delete=models.PROTECT, related_name="reserved_slots")
    start = models.DateTimeField()
    end = models.DateTimeField()
    holds = models.BooleanField(default=True, help_text="False once the reservation is cancelled.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["reservation", "device"], name="reserved_device_once"),
        ]
        indexes = [models.Index(fields=["device", "start", "end"])]

    def __str__(self):
        return f"{self.device} for {self.reservation}"
