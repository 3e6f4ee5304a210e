"""Pages: the week grid of when and where someone may book, and self-sign-up."""

import functools
import shlex
from datetime import timedelta
from zoneinfo import available_timezones

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone

from core.clients import client_address
from core.zones import site_today, site_zone
from monitoring import localaccounts
from monitoring.keys import public_key_line
from monitoring.models import Device, Host

from .coverage import active_ban, coverage_map
from .forms import SignupForm, TimeZoneForm, WeekForm
from .models import Grant, HostAccount
from .permissions import may_inspect_others, permission_name, restrict
from .services import profile_for
from .signup import PROOF_FILE, new_code, self_signup_enabled
from .weekgrid import week_days, week_rows

SIGNUP_CODE = "signup-code"  # session key


def _visible_devices(viewer, inspecting_other: bool):
    """All present GPUs; a host admin looking at someone else sees only their own hosts."""
    devices = Device.objects.filter(status=Device.Status.PRESENT).select_related("host")
    if inspecting_other and not viewer.has_perm(permission_name(Grant, "view")):
        devices = restrict(devices, viewer, "change")
    return list(devices)


def _who(principal, viewer) -> str:
    if isinstance(principal, Group):
        return f"the group {principal.name}"
    return "you" if principal == viewer else principal.get_username()


@login_required
def week(request):
    """When and where the user (or a chosen user or group) may book, for one week."""
    form = WeekForm(request.GET)
    if not form.is_valid():
        return render(request, "accesscontrol/week.html", {"form": form}, status=400)
    principal = form.cleaned_data["group"] or form.cleaned_data["user"] or request.user
    inspecting_other = principal != request.user
    if inspecting_other and not may_inspect_others(request.user):
        raise PermissionDenied("Only admins and host admins may look at other users' access.")
    zone = site_zone()
    days = week_days(form.cleaned_data["week"] or site_today(), zone)
    devices = _visible_devices(request.user, inspecting_other)
    coverage = coverage_map(principal, days[0].start, days[-1].end, devices)
    context = {
        "form": form,
        "who": _who(principal, request.user),
        "days": days,
        "rows": week_rows(coverage, days, zone),
        "ban": None if isinstance(principal, Group) else active_ban(principal),
        "zone": zone.key,
        "previous_week": days[0].day - timedelta(days=7),
        "next_week": days[0].day + timedelta(days=7),
        "may_inspect": may_inspect_others(request.user),
    }
    return render(request, "accesscontrol/week.html", context)


def signup(request):
    """Create an account by proving a UNIX account on a host (only with SELF_SIGNUP on)."""
    if not self_signup_enabled():
        raise Http404("Self-sign-up is turned off.")
    if request.user.is_authenticated:
        return redirect("access-week")
    # One code per visitor, kept until it has served: a failed try can be repeated as is.
    code = request.session.setdefault(SIGNUP_CODE, new_code())
    form = SignupForm(request.POST or None, code=code, address=client_address(request))
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            user = form.save()
            # The account proven, on the host it was proven on only (accesscontrol.signup).
            HostAccount.objects.create(
                profile=profile_for(user),
                host=form.cleaned_data["host"],
                unix_username=user.get_username(),
                proven_at=timezone.now(),
            )
        request.session.pop(SIGNUP_CODE, None)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("access-week")
    status = 400 if request.method == "POST" else 200
    context = {
        "form": form,
        "public_key": public_key_line(),
        "code": code,
        "proof_file": PROOF_FILE,
    }
    return render(request, "accesscontrol/signup.html", context, status=status)


@functools.cache
def time_zone_names() -> list[str]:
    # available_timezones() walks the tzdata files on every call; they change with upgrades.
    return sorted(available_timezones())


def account_problems(profile) -> list[str]:
    """Why jobs cannot run as the user's account on this machine's hosts (no SSH asked: other
    hosts tell when a job starts there)."""
    local = Host.objects.filter(enabled=True, transport=Host.Transport.LOCAL)
    found = (localaccounts.problem(h.name, profile.unix_username_for(h)) for h in local)
    return [why for why in found if why]


@login_required
def profile(request):
    """Your accounts on the hosts (set by admins), the service key to authorise, your zone."""
    mine = profile_for(request.user)
    form = TimeZoneForm(request.POST or None, instance=mine)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Saved.")
        return redirect("profile")
    accounts = mine.host_accounts.select_related("host")
    key = public_key_line()
    context = {
        "form": form,
        "unix_username": mine.unix_username,
        "accounts": accounts,
        "public_key": key,
        "authorize_command": f"echo {shlex.quote(key)} >> ~/.ssh/authorized_keys",
        "time_zones": time_zone_names(),
        "account_problems": account_problems(mine),
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "accesscontrol/profile.html", context, status=status)
