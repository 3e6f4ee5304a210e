"""The report's parameters from a query string, shared by the page, the CSV and the API."""

from datetime import date, timedelta

from django.core.exceptions import ValidationError

from core.zones import site_today


def choice(params) -> dict:
    """by, period, start, end; defaults: per user, per day, the last 30 days."""
    today = site_today()
    try:
        end = date.fromisoformat(params.get("end") or today.isoformat())
    except ValueError:
        raise ValidationError({"end": "Give a date as YYYY-MM-DD."}) from None
    try:
        start = date.fromisoformat(params.get("start") or (end - timedelta(days=29)).isoformat())
    except ValueError:
        raise ValidationError({"start": "Give a date as YYYY-MM-DD."}) from None
    return {
        "by": params.get("by") or "user",
        "period": params.get("period") or "day",
        "start": start,
        "end": end,
    }
