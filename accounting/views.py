"""The usage page (own figures; staff: everyone's) and its CSV export."""

import csv

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import render

from . import query, reports
from .models import DailyUsage

COLUMNS = [
    "period",
    "name",
    "reserved_hours",
    "unbooked_hours",
    "used_hours",
    "idle_hours",
    "energy_kwh",
    "co2e_kg",
]


@login_required
def usage_page(request):
    try:
        chosen = query.choice(request.GET)
        lines = reports.report(request.user, **chosen)
    except ValidationError as exc:
        context = {"errors": exc.messages, "chosen": request.GET}
        return render(request, "accounting/usage.html", context, status=400)
    if request.GET.get("format") == "csv":
        return as_csv(lines, chosen)
    widest = max((line.reserved_hours + line.used_hours for line in lines), default=0) or 1
    context = {
        "lines": lines,
        "chosen": chosen,
        "widest": widest,
        "everyone": reports.sees_everyone(request.user),
        "updated": DailyUsage.objects.order_by("-pk").values_list("day", flat=True).first(),
        "bys": list(reports.GROUPINGS),
        "periods": list(reports.PERIODS),
    }
    return render(request, "accounting/usage.html", context)


def as_csv(lines, chosen) -> HttpResponse:
    name = f"gpu-usage-{chosen['by']}-{chosen['period']}-{chosen['start']}-{chosen['end']}.csv"
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = csv.writer(response)
    writer.writerow(COLUMNS)
    for line in lines:
        row = line.as_dict()
        writer.writerow([spreadsheet_safe(row[c]) for c in COLUMNS])
    return response


# A cell starting with one of these is a formula to Excel, LibreOffice and Sheets (OWASP's
# "CSV injection"); names come from admins and users, so text is never left to start so.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value):
    """Text that a spreadsheet would run as a formula, made inert with a leading quote."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
