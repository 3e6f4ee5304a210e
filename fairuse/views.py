"""The idle page (your bookings' notices) and the one-click "keep it" from the mail."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from accesscontrol.permissions import restrict
from reservations.models import Reservation

from . import services
from .models import IdleNotice
from .policy import policy_for


@login_required
def idle_page(request):
    user = request.user
    notices = (
        restrict(IdleNotice.objects.all(), user, "view")
        .select_related("reservation__owner")
        .prefetch_related("devices__host")
    )
    ongoing = Reservation.objects.filter(
        owner=user, end__gt=timezone.now(), status=Reservation.Status.CONFIRMED
    ).prefetch_related("devices__host", "idle_notices")
    bookings = [(r, policy_for(r), _kept(r)) for r in ongoing[:50]]
    return render(
        request,
        "fairuse/idle.html",
        {
            "mine": notices.filter(reservation__owner=user)[:100],
            "others": notices.exclude(reservation__owner=user)[:100],
            "bookings": bookings,
        },
    )


def _kept(reservation) -> bool:
    return any(n.state == IdleNotice.State.KEPT for n in reservation.idle_notices.all())


@login_required
def keep(request, pk):
    """GET asks (a mail link must not act by itself: scanners open links); POST keeps."""
    reservation = get_object_or_404(Reservation, pk=pk)
    if not (request.user.is_superuser or reservation.owner_id == request.user.pk):
        raise Http404  # another user's booking: not theirs to keep, not ours to describe
    if request.method == "POST":
        try:
            services.keep(reservation, request.user)
        except (PermissionDenied, ValidationError) as exc:
            messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
        else:
            messages.success(request, f"'{reservation.title}' is kept: it will not be released.")
        return redirect("fairuse-idle")
    warned = reservation.idle_notices.filter(state=IdleNotice.State.WARNED).first()
    return render(request, "fairuse/keep.html", {"reservation": reservation, "notice": warned})
