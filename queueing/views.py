"""The queue page: your queued jobs, their places, why they wait; queue and cancel.

Reads the database only: the reasons are what the scheduler's last round found.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accesscontrol.permissions import restrict
from hiveproject.api_errors import Conflict
from jobs import services as job_services

from . import services
from .forms import EnqueueForm
from .models import QueuedJob


def visible(user):
    jobs = restrict(QueuedJob.objects.select_related("owner", "group"), user, "view")
    return jobs.prefetch_related("tasks__devices__host", "tasks__host", "runs__job")


@login_required
def queue_page(request):
    form = EnqueueForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            queued = enqueue_from(form.cleaned_data, request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Queued '{queued}': it starts when its GPUs are free.")
            return redirect("queue")
    positions = services.positions()
    jobs = visible(request.user)
    current = list(jobs.exclude(state__in=QueuedJob.ENDED))
    context = {
        "form": form,
        # (place, job) pairs, in queue order.
        "waiting": sorted((positions[j.pk], j) for j in current if j.pk in positions),
        "waiting_total": len(positions),
        "active": [j for j in current if j.state in QueuedJob.HOLDING],
        # The latest 20 only: ended jobs pile up, and the page must not load them all.
        "ended": jobs.filter(state__in=QueuedJob.ENDED).order_by("-id")[:20],
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "queueing/queue.html", context, status=status)


def enqueue_from(data: dict, user) -> QueuedJob:
    request = services.TaskRequest(
        template=data["template"],
        kind=data["kind"],
        gpu_count=data["gpu_count"] or 1,
        devices=list(data["devices"]),
        host=data["host"],
        gpu_model=data["gpu_model"],
        min_memory_mib=data["min_memory_mib"],
        env=data["env"],
    )
    return services.enqueue(
        user,
        name=data["name"],
        tasks=[request],
        priority=data["priority"] or 0,
        opportunistic=data["opportunistic"],
        requeue_on_preemption=data["requeue_on_preemption"],
        group=data["group"],
    )


@login_required
@require_POST
def cancel(request, pk):
    queued = get_object_or_404(visible(request.user), pk=pk)
    try:
        services.cancel(queued, request.user)
    except (ValidationError, PermissionDenied, Conflict) as exc:
        messages.error(request, job_services.error_text(exc))
    else:
        messages.success(request, f"Cancelled '{queued}'.")
    return redirect("queue")
