"""What the guided "New job" form makes: a job on chosen GPUs (started now, at a set time or
by hand), or queued jobs that start by themselves when their GPUs are free.

Nothing is decided here. The combinations are templating's, "may this user start here now"
is the start rule (allocation.rule.may_start), "which N GPUs now" is the placement the
queue and `hive submit --gpus N` use (allocation.placing.place), creating is
jobs.services.create_job and queueing is queueing.services.enqueue. This module picks which
of them the form's choices call for, in the form's order, and puts each refusal under the
field of the step it concerns; nothing is saved until every step has passed.
"""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction

from accesscontrol.accounts import account_for
from allocation import placing
from allocation.placement import Request, check_named_devices
from allocation.rule import may_start
from monitoring.models import Device, Host
from queueing import services as queue
from queueing.models import QueuedJob

from . import services, templating
from .forms import NewJobForm, Where
from .models import Job


@dataclass
class Outcome:
    """What the form made: a job (``start`` it now?) or queued jobs."""

    job: Job | None = None
    start: bool = False
    queued: list[QueuedJob] = field(default_factory=list)


def under(field_name: str, check, *args):
    """``check(*args)``, its refusal (if any) shown under the form field ``field_name``."""
    try:
        return check(*args)
    except ValidationError as exc:
        raise ValidationError({field_name: exc.messages}) from None


# --- step 3: the values (also the live preview) ---------------------------------------------


def parameter_sets(data: dict) -> list[dict]:
    """One dict of values per task: the grid's combinations (all, or ``samples`` of them
    drawn with ``seed``); no values at all make one task, for a command without {names}."""
    if not data["values"]:
        return [{}]
    return templating.grid(data["values"], data["samples"], data["seed"])


def specs(data: dict, sets: list[dict], host=None, devices=(), **schedule) -> list:
    return [
        services.TaskSpec(
            host=host,
            template=data["template"],
            parameters=values,
            env=data["env"],
            devices=list(devices),
            **schedule,
        )
        for values in sets
    ]


def checked_sets(data: dict) -> list[dict]:
    """The parameter sets, with the first one's command rendered (every task's command has
    the same {names}), so a missing value is said here."""
    sets = under("values", parameter_sets, data)
    under("values", services.preview, specs(data, sets[:1]))
    return sets


def preview(data: dict) -> dict:
    """How many tasks the form makes and their first command lines, built by the code that
    creates them; a refusal under the field that causes it, nothing saved."""
    return services.preview(specs(data, checked_sets(data)))


# --- step 2: where ------------------------------------------------------------------------


def picked(data: dict, user) -> tuple[Host, list[Device]]:
    """The host and GPUs picked on the list (no GPUs: a task without GPUs on the host)."""
    devices = list(data["devices"])
    if devices:
        under("devices", check_named_devices, devices)
    host = data["host"] or (devices[0].host if devices else None)
    if host is None:
        raise ValidationError(
            {"devices": "Tick the GPUs to use, or choose a host for a task without GPUs."}
        )
    under("devices", services.check_spec, user, services.TaskSpec(host, "", devices=devices))
    return host, devices


def placed_now(data: dict, user) -> tuple[Host, list[Device]]:
    """N GPUs the service picks now, as the queue would (best fit), among those the start
    rule lets ``user`` start on; on one host, as a job started now runs."""
    host = data["host"]
    request = Request(
        kind=data["where"],
        count=data["gpu_count"],
        host_id=host.pk if host else None,
        model=data["gpu_model"],
        min_memory_mib=data["min_memory_mib"],
    )
    found = placing.place(user, request)
    if not found.placed:
        raise ValidationError({"where": f"{found_sentence(found)} {WAIT_FOR_THEM}"})
    hosts = {d.host for d in found.devices}
    if len(hosts) > 1:
        raise ValidationError(
            {
                "where": f"No single host has {data['gpu_count']} GPUs you can use now, and a "
                f"job started now runs on one host. {WAIT_FOR_THEM}"
            }
        )
    return hosts.pop(), found.devices


WAIT_FOR_THEM = "Choose 'As soon as the GPUs are free' to wait for them in the queue."


def found_sentence(found: placing.Placement) -> str:
    """The placement's answer and its first three reasons, as one sentence."""
    reasons = list(dict.fromkeys(r.text for r in found.reasons))
    shown = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
    return f"{found.detail.rstrip('.')}{': ' + shown if shown else ''}."


# --- step 4: when, and what is made -------------------------------------------------------


def submit(form: NewJobForm, user) -> Outcome | None:
    """The job or queued jobs the valid form asks for; None, with the refusals added to the
    form under their fields, when a step refuses (then nothing is saved)."""
    data = form.cleaned_data
    sets = _step(form, checked_sets, data)
    if data["when"] == NewJobForm.QUEUE:
        requests = sets and _step(form, queue_requests, data, user, sets)
        queued = requests and _step(form, enqueue_each, data, user, requests)
        return Outcome(queued=queued) if queued else None
    where = picked if data["where"] == Where.DEVICES else placed_now
    place = _step(form, where, data, user)
    if place and data["when"] == NewJobForm.NOW:
        _step(form, check_start_now, data, user, *place)
    if form.errors:
        return None
    job = _step(form, create, data, user, sets, *place)
    return Outcome(job=job, start=data["when"] == NewJobForm.NOW) if job else None


def _step(form, step, *args):
    """``step(*args)``; a refusal is added to the form (under its field, if it names one)."""
    try:
        return step(*args)
    except ValidationError as exc:
        form.add_error(None, exc)
        return None


def check_start_now(data: dict, user, host: Host, devices: list[Device]) -> None:
    """The start rule over the run (until its stop time, else the reservation horizon), as
    the start itself will ask, and an account to run as on the host."""
    reasons = may_start(user, devices, None, data["scheduled_stop"])
    if reasons:
        field_name = "devices" if data["where"] == Where.DEVICES else "where"
        raise ValidationError({field_name: " ".join(r.text + "." for r in reasons)})
    under("host", account_for, user, host)


def create(data: dict, user, sets: list[dict], host: Host, devices: list[Device]) -> Job:
    # The steps before have made every other check create_job makes; the one left is that
    # the stop comes after the start.
    schedule = {key: data[key] for key in ("scheduled_start", "scheduled_stop")}
    return under(
        "scheduled_stop",
        lambda: services.create_job(
            user,
            name=data["name"],
            specs=specs(data, sets, host, devices, **schedule),
            description=data["description"],
            template=data["template"],
        ),
    )


def queue_requests(data: dict, user, sets: list[dict]) -> list[queue.TaskRequest]:
    """One queue request per task, checked as enqueue checks them (with the group's limit)."""
    named = data["where"] == Where.DEVICES
    requests = [
        queue.TaskRequest(
            template=data["template"],
            kind=data["where"],
            gpu_count=data["gpu_count"],
            devices=list(data["devices"]),
            host=None if named else data["host"],
            gpu_model=data["gpu_model"],
            min_memory_mib=data["min_memory_mib"],
            parameters=values,
            env=data["env"],
        )
        for values in sets
    ]
    under("devices" if named else "where", queue.check_request, requests[0])
    group = data["group"] or queue.default_group(user)
    under("priority", queue.check_priority, user, group, data["priority"] or 0)
    return requests


@transaction.atomic
def enqueue_each(data: dict, user, requests: list[queue.TaskRequest]) -> list[QueuedJob]:
    """One queued job per task, so each starts as soon as its own GPUs are free (a queued
    job's tasks start all at once or not at all); all are queued or none."""
    total = len(requests)
    return [
        queue.enqueue(
            user,
            # Within the name's 200 characters, however many there are.
            name=data["name"] if total == 1 else f"{data['name'][:180]} ({number} of {total})",
            tasks=[request],
            priority=data["priority"] or 0,
            opportunistic=data["opportunistic"],
            requeue_on_preemption=data["requeue_on_preemption"],
            group=data["group"],
        )
        for number, request in enumerate(requests, 1)
    ]
