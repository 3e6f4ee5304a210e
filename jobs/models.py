"""Jobs: groups of tasks, each one command run on one host in a detached GNU screen session.

A task's command is rendered from a template once, when the task is created (values are
shell-quoted then), and stored: what the pages show is exactly what runs.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from allocation.holders import TASK, Holding
from monitoring.models import Device, Host
from reservations.models import Reservation


class Job(models.Model):
    """A group of tasks of one owner (e.g. one distributed training, or one grid search)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs"
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # The template the tasks were rendered from, kept so the job can be duplicated or re-gridded.
    template = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    # While in the future, gpurun is still feeding the job commands as they come, so all its
    # tasks having ended is a gap between two commands, not the job's end. gpurun renews it
    # while it runs and clears it (and tells the end) when it returns; one killed outright
    # lets it lapse, and the next sync tells the end then (jobs.tasks.tell_lapsed_feeds).
    fed_until = models.DateTimeField(null=True, blank=True, editable=False, db_index=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self):
        return self.name

    @property
    def status(self) -> str:
        """Derived from the tasks: running > pending > failed > stopped > succeeded. A task run
        again counts by its latest run. A job whose active tasks all wait for hosts that do not
        answer is "host unreachable", not running."""
        latest = [t for t in self.tasks.all() if t.rerun_as_id is None]
        status = derive_status([(t.status, t.exit_code) for t in latest])
        active = [t for t in latest if t.is_active]
        if status == "running" and all(t.host_unreachable_since for t in active):
            return "host unreachable"
        return status


def derive_status(states: list[tuple[str, int | None]]) -> str:
    if not states:
        return "empty"
    statuses = {status for status, _ in states}
    if statuses & Task.ACTIVE:
        return "running"
    if Task.Status.PENDING in statuses:
        return "pending"
    if Task.Status.FAILED in statuses or any(
        s == Task.Status.EXITED and code != 0 for s, code in states
    ):
        return "failed"
    if Task.Status.KILLED in statuses:
        return "stopped"
    return "succeeded"


class Task(models.Model):
    """One command on one host, with zero or more GPUs, run as the job owner's UNIX account."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        STARTING = "starting", "Starting"
        RUNNING = "running", "Running"
        STOPPING = "stopping", "Stopping"
        EXITED = "exited", "Exited"  # ended on its own; exit_code says how
        KILLED = "killed", "Stopped"  # ended after interrupt/terminate/kill
        FAILED = "failed", "Failed"  # could not start, or vanished without an exit code

    # A process may exist on the host in these states; sync watches them.
    ACTIVE = frozenset({Status.STARTING, Status.RUNNING, Status.STOPPING})
    ENDED = frozenset({Status.EXITED, Status.KILLED, Status.FAILED})

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="tasks")
    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="tasks")
    devices = models.ManyToManyField(Device, blank=True, related_name="tasks")
    template = models.TextField(help_text="Command template with {name} fields.")
    parameters = models.JSONField(default=dict, blank=True, help_text="Values of the fields.")
    env = models.JSONField(default=dict, blank=True, help_text="Environment variables (rendered).")
    command = models.TextField(help_text="The rendered shell command: exactly what runs.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True, help_text="Why the task failed to start or was lost.")
    # Filled at spawn: where the task runs and how to reach it again after a restart.
    unix_username = models.CharField(max_length=64, blank=True)
    screen_session = models.CharField(max_length=100, blank=True)
    log_path = models.CharField(max_length=500, blank=True)
    argv = models.JSONField(default=list, blank=True, help_text="The argv sent to the host.")
    pid = models.PositiveIntegerField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Scheduled actions (run by the workers; see jobs.tasks.run_due_actions).
    scheduled_start = models.DateTimeField(null=True, blank=True)
    scheduled_stop = models.DateTimeField(null=True, blank=True)
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    # A graceful stop sends SIGTERM, then SIGKILL at this time if the task still runs.
    kill_at = models.DateTimeField(null=True, blank=True)
    reservation = models.ForeignKey(
        Reservation, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    # The new run of this task, once it was run again (this one keeps its status and log).
    rerun_as = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="rerun_of"
    )
    created = models.DateTimeField(auto_now_add=True)

    # Ended without success: such a task may be run again (see jobs.services.rerun_task).
    RERUNNABLE = frozenset({Status.FAILED, Status.KILLED})

    class Meta:
        ordering = ["job", "id"]
        indexes = [
            models.Index(fields=["status"]),
            models.Index(
                fields=["scheduled_start"],
                condition=Q(status="pending", scheduled_start__isnull=False),
                name="task_due_start",
            ),
        ]

    def __str__(self):
        return f"{self.job} #{self.pk} on {self.host}"

    @property
    def session_name(self) -> str:
        """The screen session's name (users attach with `screen -x`): the one it started
        with, or the one it will start with (unique per task and per installation)."""
        return self.screen_session or f"{settings.JOBS_SESSION_PREFIX}-{self.pk}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def host_unreachable_since(self):
        """For an active task whose host stopped answering the probing loop: when the host
        last answered (or was last probed, if it never did). Such a task is shown as "host
        unreachable since T" and not counted as running: nobody can tell whether it still
        runs until the host is back. None otherwise."""
        if self.status not in self.ACTIVE or self.host.status != Host.Status.UNREACHABLE:
            return None
        return self.host.last_seen or self.host.last_probe_at

    @property
    def may_rerun(self) -> bool:
        failed = self.status in self.RERUNNABLE or (
            self.status == self.Status.EXITED and self.exit_code != 0
        )
        return failed and self.rerun_as_id is None


def task_holdings(devices, start, end) -> list[Holding]:
    """Tasks as holders of their GPUs (allocation.holders): an active task holds them from
    its start until it ends; asked from a time past, tasks that ended since held them too."""
    rows = Task.devices.through.objects.filter(_held_over(start, end))
    if devices is not None:
        rows = rows.filter(device_id__in=devices)
    rows = rows.values_list(
        "device_id", "task_id", "task__job__owner_id", "task__job__owner__username",
        "task__started_at", "task__ended_at", "task__job__name", "task__job_id",
        "task__unix_username",
    )  # fmt: skip
    return [
        Holding(TASK, *held, name=name, job_id=job, run_as=unix)
        for *held, name, job, unix in rows  # held: device, task, owner id and name, start, end
    ]


def _held_over(start, end) -> Q:
    held = Q(task__status__in=Task.ACTIVE)
    if start is not None:
        held |= Q(task__status__in=Task.ENDED, task__ended_at__gt=start)
    if end is not None or start is not None:  # not those started after the time asked about
        began = Q(task__started_at__lt=end) if end else Q(task__started_at__lte=start)
        held &= began | Q(task__started_at=None)
    return held


class TaskAction(models.Model):
    """A start or a signal asked for in a request and carried out by the workers: the
    request answers at once (the task shows "starting" or "stopping"), the workers call the
    host and record here, and on the task, how it went."""

    class Action(models.TextChoices):
        SPAWN = "spawn", "start"
        INTERRUPT = "interrupt", "interrupt (SIGINT)"
        TERMINATE = "terminate", "terminate (SIGTERM)"
        KILL = "kill", "kill (SIGKILL)"
        STOP = "stop", "stop (SIGTERM, then SIGKILL)"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="actions")
    action = models.CharField(max_length=10, choices=Action.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    # The task's status when asked: a signal the host refused puts it back.
    status_before = models.CharField(max_length=10, choices=Task.Status.choices)
    # Set by the worker that took it: a task the broker hands out again (its worker died)
    # is not carried out twice; the sync settles a start left half done.
    begun_at = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        indexes = [models.Index(fields=["task", "done_at"])]

    def __str__(self):
        return f"{self.get_action_display()} of task {self.task_id}"


class TaskLog(models.Model):
    """The end of a task's log as the workers last fetched it from the host, so pages and
    the API serve logs without reaching a host. Byte offsets are those of the file on the
    host: ``text`` holds its bytes from ``start`` to ``start + len(text)``."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="stored_log")
    start = models.BigIntegerField(default=0, help_text="Bytes of the log before the kept part.")
    text = models.BinaryField(default=b"")
    fetched_at = models.DateTimeField(null=True, blank=True)
    # The task had ended when this was fetched: the log is whole and is not fetched again.
    complete = models.BooleanField(default=False)
    error = models.TextField(blank=True, help_text="Why the last fetch failed.")

    def __str__(self):
        return f"log of task {self.task_id}"

    @property
    def end(self) -> int:
        return self.start + len(self.text)
