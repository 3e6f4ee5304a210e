"""Reservations: GPUs booked in advance by one user, for exclusive use over [start, end)."""

import secrets

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from monitoring.models import Device


def overlap(start, end=None) -> Q:
    """Rows whose [start, end) overlaps [start, end) — or contains the instant ``start`` when
    no end is given. The one way every app asks "does a booking meet this time?"."""
    if end is None:
        return Q(start__lte=start, end__gt=start)
    return Q(start__lt=end, end__gt=start)


class ReservationQuerySet(models.QuerySet):
    def overlapping(self, start, end=None):
        return self.filter(overlap(start, end))


class ReservedDeviceQuerySet(models.QuerySet):
    def overlapping(self, start, end=None):
        return self.filter(overlap(start, end))

    def holding(self, start, end=None):
        """GPUs booked (not cancelled: pending approval holds the slot too) over the range."""
        return self.overlapping(start, end).filter(holds=True)


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
    devices = models.ManyToManyField(
        Device,
        through="ReservedDevice",
        through_fields=("reservation", "device"),
        related_name="reservations",
    )
    start = models.DateTimeField()
    end = models.DateTimeField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CONFIRMED)
    # Why the service changed it (e.g. cancelled because a grant ended); shown to the owner.
    note = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    # Usage over the whole reservation, stored once it has ended (see reservations.usage).
    used_utilization = models.FloatField(null=True, blank=True, help_text="Average GPU %.")
    used_memory_mib = models.FloatField(null=True, blank=True, help_text="Average MiB used.")
    idle_minutes = models.FloatField(null=True, blank=True, help_text="GPU-minutes idle.")
    busy_minutes = models.FloatField(null=True, blank=True, help_text="GPU-minutes in use.")
    usage_final = models.BooleanField(default=False)

    objects = ReservationQuerySet.as_manager()

    class Meta:
        # Ties broken in the index's own order (its rows end with the id), so a page cut by
        # offset is read along the index (core.pagination).
        ordering = ["start", "end", "id"]
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
    triggers (SQLite) refuse two holding rows whose ranges overlap on devices that share
    hardware (monitoring.models.sharing): one device, or a GPU and one of its MIG slices
    (two slices of one GPU may be booked apart), whatever code path writes them. See
    migrations 0002 and 0006.
    """

    reservation = models.ForeignKey(Reservation, on_delete=models.CASCADE, related_name="slots")
    device = models.ForeignKey(Device, on_delete=models.PROTECT, related_name="reserved_slots")
    # The GPU board the device is on (its GPU, for a MIG slice; else itself), which the
    # PostgreSQL constraint compares. Written by the database from the device (migration 0007).
    board = models.ForeignKey(
        Device,
        null=True,
        editable=False,
        db_index=False,
        on_delete=models.PROTECT,
        related_name="+",
    )
    start = models.DateTimeField()
    end = models.DateTimeField()
    holds = models.BooleanField(default=True, help_text="False once the reservation is cancelled.")

    objects = ReservedDeviceQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["reservation", "device"], name="reserved_device_once"),
        ]
        indexes = [
            models.Index(fields=["device", "start", "end"]),
            # "Ends after the week begins" picks a GPU's current and coming slots alone, where
            # "starts before it ends" walks its whole history: 8 GPUs' week among 50,000
            # bookings of five months, 0.82 ms on the first index, 0.36 on this one.
            models.Index(fields=["device", "end"], name="slot_device_end"),
        ]

    def __str__(self):
        return f"{self.device} for {self.reservation}"


class CalendarChoice(models.Model):
    """The GPUs a user picked in the overview; the calendar shows these (none: all)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="calendar_choice"
    )
    devices = models.JSONField(default=list, help_text="Ids of the GPUs shown.")

    def __str__(self):
        return f"calendar of {self.user}"


def new_feed_token() -> str:
    return secrets.token_urlsafe(32)


class CalendarFeed(models.Model):
    """A user's private iCalendar URL; the token is the only credential, so it can be renewed."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="calendar_feed"
    )
    token = models.CharField(max_length=64, unique=True, default=new_feed_token)

    def __str__(self):
        return f"calendar feed of {self.user}"
