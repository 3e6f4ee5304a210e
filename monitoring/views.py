from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from .models import Host


@login_required
def overview(request):
    """Every host and GPU from the latest stored probe (pages never reach hosts themselves)."""
    hosts = Host.objects.prefetch_related("devices")
    return render(request, "monitoring/overview.html", {"hosts": hosts})
