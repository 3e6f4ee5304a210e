"""The user's page: someone on your GPU, and you on someone's GPU."""

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.shortcuts import render
from django.utils import timezone

from accesscontrol.permissions import restrict

from .models import Violation

RECENT = timedelta(days=7)


@login_required
def violations(request):
    """Open intrusions and those of the last week that concern the user."""
    user = request.user
    recent = Violation.objects.filter(
        Q(ended_at=None) | Q(ended_at__gte=timezone.now() - RECENT)
    ).select_related("device__host", "reservation", "reservation_owner")
    mine = Q(reservation_owner=user) | Q(offender=user)
    context = {
        "on_my_gpus": recent.filter(reservation_owner=user),
        "by_me": recent.filter(offender=user),
        # Host admins and operators also see the rest of what they look after.
        "others": restrict(recent, user, "view").exclude(mine),
    }
    return render(request, "protection/violations.html", context)
