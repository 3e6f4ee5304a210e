"""Job pages: list, create (task rows, distributed template; the guided form's page, which
also queues, is board.newjob), detail, actions, logs.

Pages never reach a host (core/hostcalls.py): they read the database, which the
workers keep up to date. Actions (start, stop, signals) are checked and handed to the
workers (jobs/actions.py), and the page follows the tasks' states live from the API
(/api/jobs/<id>/, /api/tasks/<id>/log/); logs are served as the workers last fetched them;
a distributed job's free ports are asked of the workers.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.views.decorators.http import require_POST

from accesscontrol.permissions import restrict
from core.ids import MAX_ID, is_whole_number
from core.templatetags.hive_time import absolute

from . import actions, distributed, services, templating
from .api import attach_hint, log_download
from .forms import DistributedForm, JobForm, TaskRowFormSet
from .models import Job, Task


def visible_jobs(user):
    tasks = Prefetch("tasks", queryset=Task.objects.select_related("host"))
    return restrict(Job.objects.select_related("owner"), user, "view").prefetch_related(tasks)


def visible_task(user, pk) -> Task:
    tasks = restrict(Task.objects.select_related("host", "job__owner"), user, "view")
    return get_object_or_404(tasks, pk=pk)


def _ids(values) -> list[int]:
    """The object ids among submitted values; others (not a number, beyond the database's
    64 bits) name no object, so they are left out rather than refused with a 500."""
    return [int(v) for v in values if is_whole_number(v) and int(v) <= MAX_ID]


@login_required
def job_list(request):
    return render(request, "jobs/list.html", {"jobs": visible_jobs(request.user)})


def _creation_page(request, page, form, build, rows=None):
    """A job creation form. A valid POST creates the job that ``build(cleaned data)``
    describes as (template, specs) and goes to it; otherwise the form again, with its errors
    (400) and nothing saved."""
    if request.method == "POST" and form.is_valid() and (rows is None or rows.is_valid()):
        data = form.cleaned_data
        try:
            template, specs = build(data)
            job = services.create_job(
                request.user,
                name=data["name"],
                specs=specs,
                description=data["description"],
                template=template,
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, "Job created: check the commands below, then start it.")
            return redirect("job-detail", job.pk)
    status = 400 if request.method == "POST" else 200
    context = {"form": form, "rows": rows}
    return render(request, page, context, status=status)


def _schedule(data) -> dict:
    return {"scheduled_start": data["scheduled_start"], "scheduled_stop": data["scheduled_stop"]}


@login_required
def job_rows(request):
    """A job from task rows: each row a host, GPUs, and values for the template's fields."""
    rows = TaskRowFormSet(request.POST or None, prefix="rows")

    def build(data):
        specs = [
            services.TaskSpec(
                host=row["host"],
                template=data["template"],
                parameters=row["parameters"],
                env={**data["env"], **row["env"]},
                devices=list(row["devices"]),
                **_schedule(data),
            )
            for row in rows.cleaned_data
            if row.get("host")
        ]
        return data["template"], specs

    return _creation_page(request, "jobs/rows.html", JobForm(request.POST or None), build, rows)


@login_required
def job_distributed(request):
    """A distributed training job: one task per host, ranks, master address and free ports."""

    def build(data):
        nodes = [
            distributed.Node(host, [d for d in data["devices"] if d.host_id == host.pk])
            for host in data["hosts"]
        ]
        return distributed.specs_from(request.user, data, nodes)

    form = DistributedForm(request.POST or None)
    return _creation_page(request, "jobs/distributed.html", form, build)


@login_required
def job_detail(request, pk):
    # The tasks visible_jobs prefetches serve both the rows and the job's derived status.
    job = get_object_or_404(visible_jobs(request.user).prefetch_related("tasks__devices"), pk=pk)
    tasks = list(job.tasks.all())
    pending = actions.open_actions([t.pk for t in tasks])
    rows = [
        {
            "task": t,
            "command_line": templating.command_line(services.task_env(t), t.command),
            "attach": attach_hint(t),
            "pending": pending.get(t.pk),
            "status_text": status_text(t),
        }
        for t in tasks
    ]
    return render(
        request,
        "jobs/detail.html",
        {"job": job, "rows": rows, "is_owner": job.owner_id == request.user.pk},
    )


@login_required
@require_POST
def job_action(request, pk):
    """An action on the job's selected tasks (all of them when none is selected)."""
    job = get_object_or_404(visible_jobs(request.user), pk=pk)
    tasks = job.tasks.select_related("host", "job__owner")
    chosen = request.POST.getlist("tasks")
    if chosen:
        tasks = tasks.filter(pk__in=_ids(chosen))
    report_action(request, list(tasks), request.POST.get("action", ""))
    return redirect("job-detail", job.pk)


@login_required
@require_POST
def jobs_action(request):
    """An action on every task of the selected jobs (the list page's group actions)."""
    ids = _ids(request.POST.getlist("jobs"))
    tasks = Task.objects.filter(job__in=visible_jobs(request.user).filter(pk__in=ids))
    report_action(
        request, list(tasks.select_related("host", "job__owner")), request.POST.get("action", "")
    )
    return redirect("job-list")


def report_action(request, tasks, action) -> None:
    try:
        results = actions.request_all(tasks, request.user, action)
    except ValidationError as exc:
        messages.error(request, services.error_text(exc))
        return
    done = [t for t, error in results if not error]
    for task, error in results:
        if error:
            messages.error(request, f"Task {task.pk}: {error}")
    messages.info(
        request,
        f"{action}: {len(done)} of {len(results)} task{pluralize(results)} it applies to, "
        "handed to the "
        "background workers; the states below follow as they carry it out.",
    )


def status_text(task: Task) -> str:
    """The task's state in words, "Host unreachable since Thu 26 Nov 14:05" for an active
    task whose host stopped answering (in the reader's zone, like every time on the pages)."""
    since = task.host_unreachable_since
    return f"Host unreachable since {absolute(since)}" if since else task.get_status_display()


@login_required
@require_POST
def job_duplicate(request, pk):
    job = get_object_or_404(visible_jobs(request.user), pk=pk)
    try:
        copy = services.duplicate_job(job, request.user)
    except (ValidationError, PermissionDenied) as exc:
        messages.error(request, services.error_text(exc))
        return redirect("job-detail", job.pk)
    messages.success(request, "Copied: the copy runs as you. Check the commands, then start it.")
    return redirect("job-detail", copy.pk)


@login_required
def task_log(request, pk):
    """The log with live follow (the page polls /api/tasks/<id>/log/)."""
    task = visible_task(request.user, pk)
    return render(request, "jobs/log.html", {"task": task, "attach": attach_hint(task)})


@login_required
def task_log_download(request, pk):
    task = visible_task(request.user, pk)
    try:
        return log_download(task)
    except ValidationError as exc:
        messages.error(request, services.error_text(exc))
        return redirect("job-detail", task.job_id)
