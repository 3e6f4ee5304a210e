import json

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_http_methods

from .forms import LayoutForm
from .models import DashboardLayout, Host
from .templatetags.monitoring_format import gib
from .visibility import process_visibility, visible_processes


@login_required
def host_detail(request, name):
    """One host's hardware, status and GPUs (last known, read from the database), kept live
    over the websocket with the user's chosen charts, and GPU history from the history API."""
    host = get_object_or_404(Host, name=name)
    hardware = host.hardware or {}
    snapshot = host.last_snapshot or {}
    visibility = process_visibility(request.user)  # other users' command lines hidden
    host.visible_processes = visible_processes(visibility, host, snapshot.get("processes"))
    context = {
        "host": host,
        "hardware": hardware,
        "ram_gib": gib(hardware.get("memory_total_mib")),
        "disks": [disk_row(d) for d in hardware.get("disks", [])],
        "devices": host.devices.all(),
        "layout": DashboardLayout.for_user(request.user),
        "charts": DashboardLayout.CHARTS,
    }
    return render(request, "monitoring/host.html", context)


def disk_row(disk: dict) -> dict:
    total, used = disk.get("total_mib"), disk.get("used_mib")
    percent = round(100 * used / total) if total and used is not None else None
    return {
        "path": disk.get("path"),
        "used_gib": gib(used),
        "total_gib": gib(total),
        "percent": percent,
    }


@login_required
@require_http_methods(["GET", "POST"])
def dashboard_layout(request):
    """Read or save the user's dashboard layout (JSON). Bad input: 400, nothing saved."""
    if request.method == "GET":
        return JsonResponse(DashboardLayout.for_user(request.user))
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return JsonResponse({"detail": "The body is not valid JSON."}, status=400)
    if not isinstance(data, dict):
        return JsonResponse({"detail": "Send a JSON object."}, status=400)
    form = LayoutForm({k: json.dumps(v) for k, v in data.items()})
    if not form.is_valid():
        errors = {field: [str(e) for e in errs] for field, errs in form.errors.items()}
        return JsonResponse({"detail": "The layout was not saved.", **errors}, status=400)
    DashboardLayout.objects.update_or_create(user=request.user, defaults=form.cleaned_data)
    return JsonResponse(form.cleaned_data)
