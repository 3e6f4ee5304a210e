"""The queue page: your queued jobs, their places, why they wait; cancel. Jobs are queued
with the guided New job form (jobs.views.job_new, "As soon as the GPUs are free").

Reads the database only: the reasons are what the scheduler's last round found.
"""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from accesscontrol.permissions import restrict
from core.api_errors import Conflict
from jobs import services as job_services

from . import services
from .models import QueuedJob


def visible(user):
    jobs = restrict(QueuedJob.objects.select_related("owner", "group"), user, "view")
    return jobs.prefetch_related("tasks__devices__host", "tasks__host", "runs__job")


@login_required
@require_GET
def queue_page(request):
    positions = services.positions()
    jobs = visible(request.user)
    current = list(jobs.exclude(state__in=QueuedJob.ENDED))
    context = {
        # (place, job) pairs, in queue order.
        "waiting": sorted((positions[j.pk], j) for j in current if j.pk in positions),
        "waiting_total": len(positions),
        "active": [j for j in current if j.state in QueuedJob.HOLDING],
        # The latest 20 only: ended jobs pile up, and the page must not load them all.
        "ended": jobs.filter(state__in=QueuedJob.ENDED).order_by("-id")[:20],
        # The order's sentence says fair-share only where it is on (queueing.fairshare).
        "half_life": settings.QUEUE_FAIRSHARE_HALF_LIFE_HOURS,
    }
    return render(request, "queueing/queue.html", context)


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
