from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

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
