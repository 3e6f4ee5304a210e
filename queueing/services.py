"""Operations on the queue for pages, API and commands: enqueue, cancel, order, quotas.

``check_*`` validate and authorise, changing nothing; the others change state, each in one
transaction. Starting and stopping runs is the scheduler's (scheduler.py), through
jobs.services.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Sum
from django.template.defaultfilters import pluralize

from accesscontrol.permissions import can
from allocation.placement import MAX_GPUS_PER_TASK, check_named_devices
from audit.log import record
from core.api_errors import Conflict
from jobs import services as job_services
from jobs import templating
from monitoring.models import Device, Host, mig_profile_validator

from . import fairshare
from .models import QueuedJob, QueuedTask, QueueQuota, QueueRun

Kind = QueuedTask.Kind
MIN_PRIORITY = -100


@dataclass
class TaskRequest:
    """What a queued task runs and which GPUs it needs."""

    template: str
    kind: str = Kind.ONE_HOST
    gpu_count: int = 1
    devices: list[Device] = field(default_factory=list)
    host: Host | None = None
    gpu_model: str = ""
    min_memory_mib: int | None = None
    mig_profile: str = ""
    parameters: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)


# --- checks ---------------------------------------------------------------------------------


def check_request(request: TaskRequest) -> None:
    if not request.template.strip():
        raise ValidationError("Each task needs a command.")
    templating.render(request.template, request.parameters)
    templating.check_env(request.env)
    if request.kind not in Kind.values:
        raise ValidationError(
            f"Unknown GPU request {request.kind!r}: use one of {', '.join(Kind.values)}."
        )
    if request.kind == Kind.DEVICES:
        check_named_devices(request.devices)
    elif not 1 <= request.gpu_count <= MAX_GPUS_PER_TASK:
        raise ValidationError(f"A task asks for 1 to {MAX_GPUS_PER_TASK} GPUs.")
    if request.host is not None and request.kind != Kind.ONE_HOST:
        raise ValidationError("A host can be chosen only with 'N GPUs on one host'.")
    if request.mig_profile:
        check_mig_profile(request)


def check_mig_profile(request: TaskRequest) -> None:
    """'N MIG slices of a profile', on one host or any: named slices need no profile."""
    if request.kind == Kind.DEVICES:
        raise ValidationError(
            "A MIG profile asks for a number of slices; to use given slices, name them."
        )
    mig_profile_validator(request.mig_profile)


def priority_limit(user, group: Group | None) -> int:
    if user.is_superuser:
        return 10**6
    quota = QueueQuota.objects.filter(group=group).first() if group else None
    return quota.max_priority if quota else settings.QUEUE_DEFAULT_MAX_PRIORITY


def check_priority(user, group: Group | None, priority: int) -> None:
    limit = priority_limit(user, group)
    if not MIN_PRIORITY <= priority <= limit:
        where = f"in {group}" if group else "without a group"
        raise ValidationError(f"Priority must be between {MIN_PRIORITY} and {limit} {where}.")


def default_group(user) -> Group | None:
    """The first of the user's groups that has a queue quota (by name), else none."""
    return user.groups.filter(queue_quota__isnull=False).order_by("name").first()


def check_group(user, group: Group | None) -> None:
    if group is not None and not user.groups.filter(pk=group.pk).exists():
        raise ValidationError(f"{user} is not a member of {group}.")


# --- enqueue and cancel ----------------------------------------------------------------------


@transaction.atomic
def enqueue(
    owner,
    *,
    name: str,
    tasks: list[TaskRequest],
    priority: int = 0,
    opportunistic: bool = False,
    requeue_on_preemption: bool = True,
    group: Group | None = None,
) -> QueuedJob:
    """Queue a job; all or nothing. Whether it can ever start is the scheduler's to say."""
    if not name.strip():
        raise ValidationError("A queued job needs a name.")
    if not tasks:
        raise ValidationError("A queued job needs at least one task.")
    for request in tasks:
        check_request(request)
    check_waiting_cap(owner, len(tasks))
    group = group or default_group(owner)
    check_group(owner, group)
    check_priority(owner, group, priority)
    queued = QueuedJob.objects.create(
        owner=owner,
        name=name.strip(),
        group=group,
        priority=priority,
        opportunistic=opportunistic,
        requeue_on_preemption=requeue_on_preemption,
    )
    for request in tasks:
        _add_task(queued, request)
    record("queue.enqueue", actor=owner, target=queued, tasks=len(tasks), priority=priority)
    return queued


def check_waiting_cap(owner, adding: int) -> None:
    """One user's tasks waiting in the queue stay under QUEUE_MAX_WAITING_TASKS_PER_USER: each
    is placed again every round, so one person's thousands would slow the queue for everyone.
    """
    cap = settings.QUEUE_MAX_WAITING_TASKS_PER_USER
    waiting = QueuedTask.objects.filter(
        queued_job__owner=owner, queued_job__state=QueuedJob.State.WAITING
    ).count()
    if waiting + adding > cap:
        raise ValidationError(
            f"This would give you {waiting + adding} tasks waiting in the queue; at most {cap} "
            f"are allowed per user (the cap on waiting queue tasks). You have {waiting}: wait "
            "for some to start, or cancel those you no longer need."
        )


def _add_task(queued: QueuedJob, request: TaskRequest) -> QueuedTask:
    task = QueuedTask.objects.create(
        queued_job=queued,
        template=request.template,
        parameters={k: str(v) for k, v in request.parameters.items()},
        env=templating.check_env(request.env),
        kind=request.kind,
        gpu_count=len(request.devices) if request.kind == Kind.DEVICES else request.gpu_count,
        host=request.host,
        gpu_model=request.gpu_model.strip(),
        min_memory_mib=request.min_memory_mib,
        mig_profile="" if request.kind == Kind.DEVICES else request.mig_profile,
    )
    if request.kind == Kind.DEVICES:
        task.devices.set(request.devices)
    return task


def check_may_cancel(user, queued: QueuedJob) -> None:
    if not can(user, "change", queued):
        raise PermissionDenied("Only the job's owner or an admin can cancel it.")
    if queued.state in QueuedJob.ENDED:
        raise ValidationError(f"'{queued}' has already ended ({queued.get_state_display()}).")
    if queued.state == QueuedJob.State.STOPPING and not queued.requeue_after_stop:
        raise ValidationError(f"'{queued}' is already being stopped.")


def cancel(queued: QueuedJob, user) -> QueuedJob:
    """Take a job out of the queue; a running one is stopped gracefully first."""
    check_may_cancel(user, queued)
    left = QueuedJob.objects.filter(pk=queued.pk, state=QueuedJob.State.WAITING).update(
        state=QueuedJob.State.CANCELLED, reasons=[]
    )
    if not left:
        from .scheduler import stop_run  # the scheduler imports this module

        queued.refresh_from_db(fields=["state"])
        if queued.state in QueuedJob.ENDED:  # ended between the read and the cancel
            raise Conflict(
                f"'{queued}' ended meanwhile ({queued.get_state_display()}); nothing was changed."
            )
        run = open_run(queued)
        if run is None:
            raise ValidationError(f"'{queued}' is starting just now: try again in a moment.")
        stop_run(
            run,
            f"cancelled by {user}",
            requeue=False,
            outcome=QueueRun.Outcome.CANCELLED,
            user=user,
            later=True,
        )
    record("queue.cancel", actor=user, target=queued)
    queued.refresh_from_db()
    return queued


def open_run(queued: QueuedJob) -> QueueRun | None:
    return queued.runs.filter(ended_at=None).select_related("job").first()


# --- order and quotas -------------------------------------------------------------------------


def waiting_in_order(queryset=None) -> list[QueuedJob]:
    """Waiting jobs in the order the scheduler considers them: guaranteed before
    opportunistic, then by priority (highest first), then by fair-share factor (highest
    first, see queueing.fairshare), then first come first served."""
    waiting = list(
        (queryset if queryset is not None else QueuedJob.objects)
        .filter(state=QueuedJob.State.WAITING)
        .order_by("opportunistic", "-priority", "enqueued_at", "id")
    )
    shares = waiting_shares(waiting)
    return sorted(
        waiting,
        key=lambda j: (
            j.opportunistic,
            -j.priority,
            -round(shares.factor(j.owner_id, j.group_id), 6),
            j.enqueued_at,
            j.pk,
        ),
    )


def waiting_shares(waiting: list[QueuedJob]) -> fairshare.Shares:
    return fairshare.current({j.owner_id for j in waiting}, {j.group_id for j in waiting})


def positions() -> dict[int, int]:
    """Queued job id -> its place in the queue (1 = considered first)."""
    return {job.pk: place for place, job in enumerate(waiting_in_order(), 1)}


def gpus_in_use() -> dict[int | None, int]:
    """Group id -> GPUs its guaranteed (non-opportunistic) queue runs hold now."""
    rows = (
        QueueRun.objects.filter(ended_at=None, opportunistic=False)
        .values("queued_job__group")
        .annotate(gpus=Sum("gpus"))
    )
    return {row["queued_job__group"]: row["gpus"] for row in rows}


def quotas() -> dict[int, QueueQuota]:
    return {q.group_id: q for q in QueueQuota.objects.select_related("group")}


def quota_sentence(quota: QueueQuota, used: int, need: int) -> str:
    if need > quota.max_gpus:
        return (
            f"group quota too small: {quota.group} may hold {quota.max_gpus} "
            f"GPU{pluralize(quota.max_gpus)}, this job "
            f"needs {need} (make it opportunistic to run beyond the quota)"
        )
    return (
        f"group quota reached: {quota.group} holds {used} of its {quota.max_gpus} "
        f"GPU{pluralize(quota.max_gpus)}, "
        f"this job needs {need}"
    )


def spec_for(task, host, devices, extra_env=None) -> job_services.TaskSpec:
    """The jobs.services spec of one placed (part of a) queued task."""
    return job_services.TaskSpec(
        host=host,
        template=task.template,
        parameters=task.parameters,
        env={**task.env, **(extra_env or {})},
        devices=devices,
    )
