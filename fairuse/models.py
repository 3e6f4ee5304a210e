"""Idle policies, what the probes saw of each reserved GPU, and the notices sent about it."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q

from monitoring.models import Device, Host
from reservations.models import Reservation


class Action(models.TextChoices):
    """What happens to an idle booking, from the most lenient to the strictest."""

    OFF = "off", "Nothing"
    WARN = "warn", "Warn the owner"
    RELEASE = "release", "Warn, then give the idle GPUs back"


class IdlePolicy(models.Model):
    """An idle rule for one host's GPUs or one group's members (see fairuse.policy)."""

    host = models.OneToOneField(
        Host, null=True, blank=True, on_delete=models.CASCADE, related_name="idle_policy"
    )
    group = models.OneToOneField(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="idle_policy"
    )
    action = models.CharField(max_length=10, choices=Action.choices, default=Action.WARN)
    minutes = models.PositiveIntegerField(
        default=30, help_text="Minutes a reserved GPU may stay idle before the owner is warned."
    )
    grace_minutes = models.PositiveIntegerField(
        default=15, help_text="Minutes between the warning and the release."
    )

    class Meta:
        verbose_name_plural = "idle policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(host__isnull=False, group__isnull=True)
                | Q(host__isnull=True, group__isnull=False),
                name="idle_policy_host_xor_group",
            )
        ]

    def __str__(self):
        scope = f"host {self.host}" if self.host_id else f"group {self.group}"
        return f"{scope}: {self.get_action_display()} after {self.minutes} min"


class GpuActivity(models.Model):
    """What the probes last saw of one GPU of a running reservation.

    ``idle_since`` is when the GPU was first seen idle without a break since (None while in
    use); ``observed_at`` is the last probe that saw it, so a host that stops answering
    never makes a booking look idle.
    """

    reservation = models.ForeignKey(
        Reservation, on_delete=models.CASCADE, related_name="gpu_activity"
    )
    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="+")
    idle_since = models.DateTimeField(null=True, blank=True)
    last_active = models.DateTimeField(null=True, blank=True)
    observed_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "GPU activity"
        constraints = [
            models.UniqueConstraint(fields=["reservation", "device"], name="gpu_activity_once")
        ]

    def __str__(self):
        return f"{self.device} in {self.reservation}"


class IdleNotice(models.Model):
    """One idle episode of a reservation: warned, then kept, resolved or released.

    At most one notice per reservation is open (warned) at a time, enforced by the database,
    so two workers never warn twice for one episode.
    """

    class State(models.TextChoices):
        WARNED = "warned", "Warned"
        KEPT = "kept", "Kept by its owner"
        RESOLVED = "resolved", "In use again"
        RELEASED = "released", "Released"

    reservation = models.ForeignKey(
        Reservation, on_delete=models.CASCADE, related_name="idle_notices"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.WARNED)
    action = models.CharField(max_length=10, choices=Action.choices)
    devices = models.ManyToManyField(Device, related_name="+", help_text="The idle GPUs.")
    created = models.DateTimeField(auto_now_add=True)
    # When the idle GPUs go back if still idle (None: the policy only warns).
    release_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    kept_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    outcome = models.TextField(blank=True, help_text="What happened, in words.")

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(
                fields=["reservation"], condition=Q(state="warned"), name="idle_notice_one_open"
            ),
            models.UniqueConstraint(
                fields=["reservation"], condition=Q(state="kept"), name="idle_notice_one_kept"
            ),
        ]

    def __str__(self):
        return f"{self.get_state_display()}: {self.reservation}"
