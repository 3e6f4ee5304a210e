"""The guided "New job" page: a job on chosen GPUs (started now, at a set time or by hand), or
queued jobs that start by themselves when their GPUs are free.

It offers both a job (jobs) and the queue (queueing), and shows the board's live GPUs to
pick from, so it lives here, above all three: jobs does not know the queue, which is built
on it. Nothing is decided here. The job's steps are jobs.guided's; queueing is
queueing.services.enqueue. This module picks which of them the form's choices call for, in
the form's order; nothing is saved until every step has passed.
"""

from dataclasses import dataclass, field

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import transaction
from django.shortcuts import redirect, render

from allocation.placing import usability
from jobs.forms import NewJobForm, Where
from jobs.guided import check_start_now, checked_sets, create, picked, placed_now, under
from jobs.models import Job
from jobs.views import report_action
from queueing import services as queue
from queueing.models import QueuedJob

from .tiles import board_rows


@dataclass
class Outcome:
    """What the form made: a job (``start`` it now?) or queued jobs."""

    job: Job | None = None
    start: bool = False
    queued: list[QueuedJob] = field(default_factory=list)


@login_required
def job_new(request):
    """The guided form: the command, where (GPUs picked on a list with their live state, or
    N GPUs the service picks), the values (with a live preview), and when it starts. A link
    may preset where and when (``?where=devices&devices=12&when=now``)."""
    form = NewJobForm(request.POST or None, user=request.user, initial=_preset(request.GET))
    if request.method == "POST" and form.is_valid():
        outcome = submit(form, request.user)
        if outcome is not None:
            return _made(request, outcome)
    status = 400 if request.method == "POST" else 200
    picker = gpu_picker(request, form)
    context = {"form": form, "picker": picker, "usable_now": _usable_now(picker)}
    return render(request, "jobs/new.html", context, status=status)


def _preset(query) -> dict:
    """The choices a link presets; the form shows them, and checks them only when sent."""
    preset = {name: query[name] for name in ("where", "when", "host") if name in query}
    if "devices" in query:
        preset["devices"] = query.getlist("devices")
    return preset


def _made(request, outcome: Outcome):
    """Where the guided form goes once it has made something, and what it says there."""
    if outcome.queued:
        names = ", ".join(f"'{q}'" for q in outcome.queued[:3])
        more = f" and {len(outcome.queued) - 3} more" if len(outcome.queued) > 3 else ""
        messages.success(
            request, f"Queued {names}{more}: each starts by itself when its GPUs are free."
        )
        return redirect("queue")
    job = outcome.job
    if outcome.start:
        report_action(request, list(job.tasks.select_related("host", "job__owner")), "spawn")
    elif job.tasks.filter(scheduled_start__isnull=False).exists():
        messages.success(request, "Job created: it starts at the time you set (see below).")
    else:
        messages.success(request, "Job created: check the commands below, then start it.")
    return redirect("job-detail", job.pk)


def gpu_picker(request, form) -> list:
    """The hosts and their GPUs with the board's live state (free, busy, reserved by X, a
    job...) and whether the user may start on each now (the start rule, and why not), for
    the form's GPU picker; the ones already chosen stay ticked."""
    chosen = {str(c) for c in form["devices"].value() or []}
    why_not = {device.pk: reasons for device, reasons in usability(request.user)}
    rows = board_rows(request.user)
    for row in rows:
        row.gpus = [gpu for gpu in row.gpus if not gpu["lost"]]  # the form refuses lost GPUs
        for gpu in row.gpus:
            gpu["chosen"] = str(gpu["id"]) in chosen
            reasons = why_not.get(gpu["id"], [])
            gpu["usable"] = not reasons
            gpu["why_not"] = reasons[0].text if reasons else ""
    return [row for row in rows if row.gpus]


def _usable_now(picker: list) -> tuple[int, int]:
    """(GPUs the user may start on now, GPUs listed)."""
    gpus = [gpu for row in picker for gpu in row.gpus]
    return sum(gpu["usable"] for gpu in gpus), len(gpus)


# --- what the form makes --------------------------------------------------------------------


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
