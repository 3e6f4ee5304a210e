"""Pages of reservations. The calendar's script reads and writes bookings through the API
(/api/reservations/, /api/access/), like every other client.
"""

from datetime import date, datetime, time, timedelta
from itertools import groupby

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accesscontrol.zones import user_zone
from core.zones import check_calendar_year
from monitoring.models import Device

from . import calendar, ical, overview, services, stats
from .filters import id_list
from .models import CalendarChoice, CalendarFeed, Reservation
from .usage import usage_of

# --- the week calendar ------------------------------------------------------------------------


@login_required
def calendar_page(request):
    zone = user_zone(request.user)
    devices = calendar.chosen_devices(request.user)
    shown_hosts = {d.host.name for d in devices}
    context = {
        "hosts": Device.objects.filter(status=Device.Status.PRESENT)
        .values_list("host__name", flat=True)
        .distinct()
        .order_by("host__name"),
        "shown_host": shown_hosts.pop() if len(shown_hosts) == 1 else None,
        "upcoming": Reservation.objects.filter(owner=request.user, end__gt=timezone.now())
        .exclude(status=Reservation.Status.CANCELLED)
        .prefetch_related("devices__host")
        .order_by("start")[:6],
        "config": {
            "resources": calendar.resources(devices),
            "user": request.user.get_username(),
            "date": request.GET.get("date", ""),
            "min_minutes": int(services.Rules.from_settings().min_duration.total_seconds() // 60),
        },
        "zone": zone.key,
        "narrowed": len(devices),
    }
    return render(request, "reservations/calendar.html", context)


# --- the long-term overview -------------------------------------------------------------------


def _overview_span(request, zone):
    """(first local midnight, days) from ?start=YYYY-MM-DD&days=N; errors name the field."""
    try:
        days = int(request.GET.get("days") or 7)
    except ValueError:
        raise ValidationError({"days": "Days is a whole number."}) from None
    if not 1 <= days <= 31:
        raise ValidationError({"days": "Show between 1 and 31 days."})
    text = request.GET.get("start") or timezone.localdate(timezone=zone).isoformat()
    try:
        first = date.fromisoformat(text)
    except ValueError:
        raise ValidationError({"start": f"{text!r} is not a date (YYYY-MM-DD)."}) from None
    check_calendar_year(first, "start")
    return datetime.combine(first, time(), tzinfo=zone), days


def _chosen_ids(form) -> list[int]:
    """The GPUs ticked, or all present GPUs of the host picked on the calendar page."""
    if "host" not in form:
        return id_list(form.getlist("devices"), "devices")
    present = Device.objects.filter(host__name=form["host"], status=Device.Status.PRESENT)
    ids = list(present.values_list("pk", flat=True))
    if not ids:
        raise ValidationError({"host": f"No host named {form['host']!r} with GPUs."})
    return ids


def _host_groups(rows: list[overview.Row]) -> list[tuple]:
    return [(host, list(group)) for host, group in groupby(rows, key=lambda r: r.device.host)]


@login_required
def overview_page(request):
    zone = user_zone(request.user)
    try:
        if request.method == "POST":
            ids = _chosen_ids(request.POST)
            CalendarChoice.objects.update_or_create(user=request.user, defaults={"devices": ids})
            return redirect("reservations-calendar")
        start, days = _overview_span(request, zone)
    except ValidationError as exc:
        context = {"errors": exc.messages, "zone": zone.key}
        return render(request, "reservations/overview.html", context, status=400)
    rows = overview.overview_rows(request.user, start, days)
    choice = CalendarChoice.objects.filter(user=request.user).first()
    context = {
        "hosts": _host_groups(rows),
        "chosen": set(choice.devices) if choice else set(),
        "days": [(start + timedelta(days=i)).date() for i in range(days)],
        "start": start.date(),
        "span": days,
        "zone": zone.key,
        "previous": (start - timedelta(days=days)).date(),
        "next": (start + timedelta(days=days)).date(),
    }
    return render(request, "reservations/overview.html", context)


# --- my reservations, the calendar feed, the usage summary ------------------------------------


@login_required
def mine_page(request):
    now, zone = timezone.now(), user_zone(request.user)
    own = (
        Reservation.objects.filter(owner=request.user)
        .prefetch_related("devices__host")
        .order_by("-start")
    )
    upcoming = list(own.filter(end__gt=now).order_by("start"))
    past = list(own.filter(end__lte=now)[:100])
    context = {
        "upcoming": [(r, usage_of(r, now)) for r in upcoming],
        "past": [(r, usage_of(r, now)) for r in past],
        "feed_url": request.build_absolute_uri(
            reverse("reservations-ical", args=[ical.feed_for(request.user).token])
        ),
        "zone": zone,
    }
    return render(request, "reservations/mine.html", context)


@require_POST
@login_required
def renew_feed(request):
    ical.renew_feed(request.user)
    return redirect("reservations-mine")


@require_GET
def ical_feed(request, token):
    """Private by its secret URL: calendar apps cannot sign in."""
    feed = CalendarFeed.objects.filter(token=token).select_related("user").first()
    if feed is None or not feed.user.is_active:
        raise Http404("No such calendar feed (it may have been renewed).")
    response = HttpResponse(ical.feed_text(feed.user), content_type="text/calendar; charset=utf-8")
    response["Cache-Control"] = "private, max-age=300"
    return response


@login_required
def usage_summary(request):
    """Staff only: GPU-hours booked vs used per user and per group over a period."""
    if not request.user.is_staff:
        raise PermissionDenied("Only staff may see everyone's usage.")
    zone = user_zone(request.user)
    try:
        start, days = _overview_span(request, zone)
    except ValidationError as exc:
        return render(request, "reservations/usage.html", {"errors": exc.messages}, status=400)
    users, groups = stats.summary(start, start + timedelta(days=days))
    context = {"users": users, "groups": groups, "start": start.date(), "span": days}
    return render(request, "reservations/usage.html", context)
