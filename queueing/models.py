"""The queue: jobs that start by themselves when the GPUs they need are free and unreserved.

A queued job is a recipe, not a run. Its tasks (QueuedTask) say what to run and which GPUs
they need: named GPUs, "N GPUs on one host" or "N GPUs on any hosts". The scheduler places
all of them at once (gang start) and only then turns them into an ordinary jobs.Job with
jobs.Task rows on the chosen hosts (via jobs.services), recorded as a QueueRun. A job that is
preempted and requeued gets a fresh jobs.Job on its next start: tasks of jobs are one-shot.

GpuClaim rows (one per GPU, unique) are the database's guarantee that two runs never hold
the same GPU, however many schedulers run at once.
"""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.template.defaultfilters import pluralize
from django.utils import timezone

from allocation import placement
from allocation.holders import QUEUE_RUN, Holding
from jobs.models import Job
from monitoring.models import Device, Host, mig_profile_validator


class QueueQuota(models.Model):
    """A group's share of the queue: concurrent GPUs and the highest priority its members set.

    Opportunistic jobs do not count against (nor are limited by) the quota: they run on GPUs
    nobody else wants and are preempted first.
    """

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="queue_quota")
    max_gpus = models.PositiveIntegerField(
        help_text="GPUs the group's queued jobs may hold at once (opportunistic ones aside)."
    )
    max_priority = models.IntegerField(
        default=0, help_text="The highest priority members may give their queued jobs."
    )

    class Meta:
        ordering = ["group__name"]

    def __str__(self):
        gpus = f"{self.max_gpus} GPU{pluralize(self.max_gpus)}"
        return f"{self.group}: {gpus}, priority up to {self.max_priority}"


class QueuedJob(models.Model):
    """A job waiting for (or started from) the queue; ordered by priority, then FIFO."""

    class State(models.TextChoices):
        WAITING = "waiting", "Waiting"
        STARTING = "starting", "Starting"
        RUNNING = "running", "Running"
        STOPPING = "stopping", "Stopping"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        PREEMPTED = "preempted", "Preempted (not requeued)"

    # A run may hold GPUs in these states.
    HOLDING = frozenset({State.STARTING, State.RUNNING, State.STOPPING})
    ENDED = frozenset({State.FINISHED, State.FAILED, State.CANCELLED, State.PREEMPTED})

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="queued_jobs"
    )
    name = models.CharField(max_length=200)
    group = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="queued_jobs",
        help_text="Whose quota the job counts against (empty: no quota applies).",
    )
    priority = models.IntegerField(default=0, help_text="Higher starts first.")
    opportunistic = models.BooleanField(
        default=False,
        help_text="Runs beyond the group's quota on GPUs nobody else wants; preempted first.",
    )
    requeue_on_preemption = models.BooleanField(
        default=True, help_text="Back to the queue when stopped for a reservation or a job."
    )
    # Kept when the job is requeued, so it keeps its place among its priority.
    enqueued_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=10, choices=State.choices, default=State.WAITING)
    # Why it is not running, as of the scheduler's last round (sentences for people).
    reasons = models.JSONField(default=list, blank=True)
    reasons_at = models.DateTimeField(null=True, blank=True)
    # Why a run is being stopped, and whether the job goes back to waiting afterwards.
    stop_reason = models.TextField(blank=True)
    requeue_after_stop = models.BooleanField(default=False)
    start_failures = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-priority", "enqueued_at", "id"]
        indexes = [models.Index(fields=["state"])]

    def __str__(self):
        return self.name


class QueuedTask(models.Model):
    """One command of a queued job and the GPUs it needs.

    With "any hosts", the placed GPUs may lie on several hosts: the command then runs once
    per host on that host's share, with HIVE_NODE_RANK, HIVE_NNODES and HIVE_MASTER_ADDR set.
    """

    Kind = placement.Kind  # how it asks for GPUs

    queued_job = models.ForeignKey(QueuedJob, on_delete=models.CASCADE, related_name="tasks")
    template = models.TextField(help_text="Command template with {name} fields.")
    parameters = models.JSONField(default=dict, blank=True)
    env = models.JSONField(default=dict, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.ONE_HOST)
    gpu_count = models.PositiveIntegerField(default=1, help_text="N (unless GPUs are named).")
    devices = models.ManyToManyField(Device, blank=True, related_name="queued_tasks")
    host = models.ForeignKey(
        Host,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="queued_tasks",
        help_text="Only this host (N GPUs on one host).",
    )
    gpu_model = models.CharField(
        max_length=100, blank=True, help_text="Only GPUs whose model contains this, e.g. A100."
    )
    min_memory_mib = models.PositiveIntegerField(null=True, blank=True)
    mig_profile = models.CharField(
        max_length=32,
        blank=True,
        validators=[mig_profile_validator],
        help_text="Only MIG slices of this profile, e.g. 1g.10gb (empty: whole GPUs).",
    )

    class Meta:
        ordering = ["queued_job", "id"]

    def __str__(self):
        return f"{self.queued_job} task {self.pk}"

    def describe(self) -> str:
        """E.g. '4 GPUs on one host (model A100, at least 40000 MiB)', '1 MIG 1g.10gb slice
        on any hosts' or 'node-1:0, node-1:1'."""
        if self.kind == self.Kind.DEVICES:
            return ", ".join(str(d) for d in self.devices.all())
        where = f"on {self.host}" if self.host else self.get_kind_display().split(" ", 2)[2]
        limits = [f"model {self.gpu_model}"] if self.gpu_model else []
        if self.min_memory_mib:
            limits.append(f"at least {self.min_memory_mib} MiB")
        plural = "s" if self.gpu_count != 1 else ""
        what = f"MIG {self.mig_profile} slice{plural}" if self.mig_profile else f"GPU{plural}"
        text = f"{self.gpu_count} {what} {where}"
        return f"{text} ({', '.join(limits)})" if limits else text


class QueueRun(models.Model):
    """One start of a queued job: the jobs.Job it became, and how that ended."""

    class Outcome(models.TextChoices):
        RUNNING = "", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"
        PREEMPTED = "preempted", "Preempted"
        CANCELLED = "cancelled", "Cancelled"
        START_FAILED = "start_failed", "Could not start"

    queued_job = models.ForeignKey(QueuedJob, on_delete=models.CASCADE, related_name="runs")
    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="queue_run")
    opportunistic = models.BooleanField(default=False)
    gpus = models.PositiveIntegerField(help_text="GPUs held (counted against the quota).")
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=12, choices=Outcome.choices, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self):
        return f"{self.queued_job} run {self.pk}"


class GpuClaim(models.Model):
    """A GPU held by a queue run. The unique device makes a second claim fail in the database."""

    device = models.OneToOneField(Device, on_delete=models.CASCADE, related_name="queue_claim")
    run = models.ForeignKey(QueueRun, on_delete=models.CASCADE, related_name="claims")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.device} for {self.run}"


def claim_holdings(devices, start, end) -> list[Holding]:
    """Claims as holders of their GPUs (allocation.holders): from the round that placed the
    run until the run ends (its claims are deleted then), so only present ones exist."""
    claims = GpuClaim.objects.all()
    if devices is not None:
        claims = claims.filter(device_id__in=devices)
    if end is not None or start is not None:  # not those made after the time asked about
        claims = claims.filter(created__lt=end) if end else claims.filter(created__lte=start)
    rows = claims.values_list(
        "device_id", "run_id", "run__queued_job__owner_id", "run__queued_job__owner__username",
        "created", "run__queued_job__name", "run__job_id", "run__opportunistic",
        "run__queued_job__state",
    )  # fmt: skip
    # An opportunistic run that has started may be stopped for a job within its quota.
    running = QueuedJob.State.RUNNING
    return [
        Holding(
            QUEUE_RUN,
            *held,
            None,
            name=name,
            job_id=job,
            preemptible=opportunistic and state == running,
        )
        for *held, name, job, opportunistic, state in rows  # held: device, run, owner, since
    ]


class DispatchRequest(models.Model):
    """A counter bumped by every event that wants a scheduling round.

    The dispatcher holding the lease runs again when the counter moved during its round, so
    an event arriving while another worker dispatches is never lost.
    """

    requested = models.PositiveBigIntegerField(default=0)

    def __str__(self):
        return f"dispatch requests: {self.requested}"
