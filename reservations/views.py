"""Pages of reservations and the calendar's JSON endpoints.

The JSON endpoints call reservations.services like the API does and answer errors in the
API's shape ({"detail": ..., <field>: [...]}), so the calendar shows the same messages.
Times travel as wall-clock text in the user's own zone (see core.zones and accesscontrol.zones).
"""

import json
from datetime import date, datetime, time, timedelta
from functools import wraps
from itertools import groupby

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accesscontrol.zones import user_zone
from core.api_errors import Conflict
from core.zones import check_calendar_year, parse_wall, wall_text
from monitoring.models import Device

from . import calendar, ical, overview, services, stats
from .api import as_api_error
from .filters import id_list
from .models import CalendarChoice, CalendarFeed, Reservation
from .usage import usage_of


def signed_in_json(view):
    """Like login_required, but a JSON 403 instead of a redirect to the login page."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not (request.user.is_authenticated and request.user.is_active):
            return JsonResponse({"detail": "Sign in first."}, status=403)
        try:
            return view(request, *args, **kwargs)
        except ValidationError as exc:
            return JsonResponse(as_api_error(exc).detail, status=400)
        except PermissionDenied as exc:
            return JsonResponse({"detail": str(exc) or "Not allowed."}, status=403)
        except Reservation.DoesNotExist:
            return JsonResponse({"detail": "No such reservation."}, status=404)
        except Conflict as exc:
            return JsonResponse({"detail": str(exc)}, status=409)

    return wrapper


def _json_body(request) -> dict:
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise ValidationError("The request body is not JSON.") from None
    if not isinstance(body, dict):
        raise ValidationError("The request body must be a JSON object.")
    return body


def _devices(ids: list[int]) -> list[Device]:
    devices = list(Device.objects.filter(pk__in=ids).select_related("host"))
    missing = sorted(set(ids) - {d.pk for d in devices})
    if missing:
        raise ValidationError({"devices": f"Unknown GPU id(s): {missing}."})
    return devices


def _title(body: dict) -> str:
    title = str(body.get("title") or "").strip()
    if not title:
        raise ValidationError({"title": "Give the reservation a title."})
    if len(title) > 200:
        raise ValidationError({"title": "A title has at most 200 characters."})
    return title


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


@require_GET
@signed_in_json
def calendar_events(request):
    zone = user_zone(request.user)
    start = parse_wall(request.GET.get("start", ""), zone, "start")
    end = parse_wall(request.GET.get("end", ""), zone, "end")
    if not timedelta(0) < end - start <= timedelta(days=42):
        raise ValidationError(
            {"end": "Ask for a range of up to six weeks, ending after it starts."}
        )
    requested = request.GET.get("devices")
    requested = id_list(requested, "devices") if requested else None
    devices = calendar.chosen_devices(request.user, requested)
    return JsonResponse(
        {"events": calendar.calendar_events(request.user, devices, start, end, zone)}
    )


@require_POST
@signed_in_json
def book(request):
    body, zone = _json_body(request), user_zone(request.user)
    reservation = services.create_reservation(
        request.user,
        title=_title(body),
        description=str(body.get("description") or ""),
        devices=_devices(id_list(body.get("devices") or [], "devices")),
        start=parse_wall(body.get("start"), zone, "start"),
        end=parse_wall(body.get("end"), zone, "end"),
    )
    return JsonResponse(_details(reservation, request.user, zone), status=201)


def _details(reservation: Reservation, user, zone) -> dict:
    now = timezone.now()
    usage = usage_of(reservation, now)
    return {
        "id": reservation.pk,
        "title": reservation.title,
        "description": reservation.description,
        "owner": reservation.owner.get_username(),
        "status": reservation.status,
        "status_text": reservation.get_status_display(),
        "note": reservation.note,
        "start": wall_text(reservation.start, zone),
        "end": wall_text(reservation.end, zone),
        "devices": [calendar.device_label(d) for d in reservation.devices.all()],
        "device_ids": [d.pk for d in reservation.devices.all()],
        "ongoing": reservation.start <= now < reservation.end and reservation.holds_devices,
        "may_change": reservation.holds_devices
        and reservation.end > now
        and (user.is_superuser or reservation.owner_id == user.pk),
        "usage": None if usage is None else usage.__dict__,
    }


def _reservation(pk) -> Reservation:
    return Reservation.objects.select_related("owner").prefetch_related("devices__host").get(pk=pk)


@signed_in_json
def reservation_json(request, pk):
    """GET: details (everyone signed in sees the calendar); POST: edit (owner or admin)."""
    reservation, zone = _reservation(pk), user_zone(request.user)
    if request.method == "POST":
        body = _json_body(request)
        changes = {"title": _title(body), "description": str(body.get("description") or "")}
        for field in ("start", "end"):
            if body.get(field):
                changes[field] = parse_wall(body[field], zone, field)
        if "devices" in body:
            changes["devices"] = _devices(id_list(body["devices"], "devices"))
        services.update_reservation(reservation, request.user, **changes)
        reservation = _reservation(pk)
    elif request.method != "GET":
        return JsonResponse({"detail": "Use GET or POST."}, status=405)
    return JsonResponse(_details(reservation, request.user, zone))


@require_POST
@signed_in_json
def cancel(request, pk):
    reservation = _reservation(pk)
    services.cancel_reservation(reservation, request.user)
    return JsonResponse(_details(_reservation(pk), request.user, user_zone(request.user)))


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
