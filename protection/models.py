"""Intruders on GPUs: processes seen where they may not run, and what was done about them."""

from django.conf import settings
from django.db import models

from monitoring.containers import describe_owner
from monitoring.models import Device, Host
from reservations.models import Reservation


class ProcessOnGpuKey:
    """The identity of one intrusion: one process of one UNIX owner on one GPU, per reservation.

    Shared by the stored Sighting and Violation rows; detection's Intrusion builds the same
    tuple from live objects, so the three can be matched cycle after cycle.
    """

    def key(self) -> tuple:
        return (self.device_id, self.pid, self.offender_unix, self.reservation_id)


class Sighting(ProcessOnGpuKey, models.Model):
    """A process seen where it may not run, not yet flagged: the grace period's memory.

    Only for processes that may be just ending: one already running when the reservation's
    slot began (seen in the slot's first checked probe), or any process on a GPU without a
    reservation (strict level). Kept per (GPU, PID, UNIX owner, reservation) until it has
    been seen in more consecutive probes than PROTECTION_GRACE_CYCLES; then it becomes a
    Violation. A process that is gone by then is forgotten, never flagged. A process that
    appears while a reservation is running is flagged at first sight and never has one.
    """

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="+")
    pid = models.PositiveIntegerField()
    offender_unix = models.CharField(max_length=64, blank=True)
    reservation = models.ForeignKey(
        Reservation, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    cycles = models.PositiveIntegerField(default=1)

    def __str__(self):
        return f"pid {self.pid} on {self.device_id} ({self.cycles} cycles)"


class CheckedProbe(models.Model):
    """The latest probe of a host that detection has checked, and the one checked before it.

    This is how detection tells a process that appeared during a reservation (absent from
    an earlier checked probe of the slot: an intruder at first sight) from one that was
    already there when the slot began (the grace period's case). Counting checked probes
    rather than clock time keeps that right when a loaded machine probes late.
    """

    host = models.OneToOneField(Host, on_delete=models.CASCADE, primary_key=True, related_name="+")
    probe_at = models.DateTimeField()
    previous_probe_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.host_id} checked at {self.probe_at}"


class Violation(ProcessOnGpuKey, models.Model):
    """One continuing intrusion: one process of someone else on a GPU.

    Updated each cycle it is still there (``last_seen``), ended when it is gone
    (``ended_at``). ``offender_unix`` is empty when the owner could not be resolved (a
    container's numeric uid, a container without an owner label whose process runs as root,
    a PID that ps could not see): "unknown owner", never a guess.
    ``reservation`` is empty for unreserved use flagged by the strict level.
    """

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="violations")
    reservation = models.ForeignKey(
        Reservation,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="violations",
    )
    reservation_owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="violations_on_my_gpus",
    )
    offender_unix = models.CharField("offender (UNIX)", max_length=64, blank=True)
    offender = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="violations_committed",
        help_text="The service user with this UNIX account on the host, if any.",
    )
    pid = models.PositiveIntegerField()
    command = models.TextField(blank=True)
    CONTAINER_NAME_LENGTH = 128
    # The Docker, Podman or Kubernetes container the process ran in (monitoring.containers);
    # empty outside one.
    container_id = models.CharField(
        max_length=12, blank=True, default="", help_text="Short id of its container, if any."
    )
    container_name = models.CharField(max_length=CONTAINER_NAME_LENGTH, blank=True, default="")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-first_seen"]
        indexes = [models.Index(fields=["ended_at"], name="violation_ended_at")]

    def __str__(self):
        return f"{self.offender_name} (pid {self.pid}) on {self.device}"

    @property
    def offender_name(self) -> str:
        """ "alice", "alice (container train-3)", "container train-3 (owner unknown)"."""
        return describe_owner(self.offender_unix or None, self.container_id, self.container_name)

    @property
    def is_open(self) -> bool:
        return self.ended_at is None


def intruders() -> dict[int, str]:
    """Device id -> "linus, alice (container x)": the processes protection flagged there
    and that are still running (its open violations), whatever the protection level. The
    board shows them, at the page's load and live (monitoring.live.register_intruders)."""
    found: dict[int, set[str]] = {}
    open_ones = Violation.objects.filter(ended_at=None).only(
        "device_id", "offender_unix", "container_id", "container_name"
    )
    for violation in open_ones:
        found.setdefault(violation.device_id, set()).add(violation.offender_name)
    return {device: ", ".join(sorted(names)) for device, names in found.items()}


class HandlerRun(models.Model):
    """One handler's run for one violation: what it did, or why it failed."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        SKIPPED = "skipped", "Skipped"
        FAILED = "failed", "Failed"

    violation = models.ForeignKey(Violation, on_delete=models.CASCADE, related_name="handler_runs")
    handler = models.CharField(max_length=200, help_text="Dotted path from VIOLATION_HANDLERS.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    outcome = models.CharField(max_length=255, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["started_at"]
        indexes = [
            models.Index(fields=["handler", "started_at"], name="handlerrun_handler_started")
        ]

    def __str__(self):
        return f"{self.handler}: {self.get_status_display()}"
