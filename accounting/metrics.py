"""Per-user counters for /metrics: totals of the daily rows (one query per scrape)."""

from django.db.models import Sum
from prometheus_client.core import CounterMetricFamily

from .models import DailyUsage

# (metric name without _total, help, field, scale to the unit)
HOUR = 1 / 3600
COUNTERS = [
    ("hive_user_gpu_reserved_hours", "GPU-hours held by bookings.", "reserved_seconds", HOUR),
    (
        "hive_user_gpu_unbooked_hours",
        "GPU-hours held by the user's tasks outside any booking.",
        "unbooked_seconds",
        HOUR,
    ),
    ("hive_user_gpu_used_hours", "GPU-hours at or above the idle load.", "used_seconds", HOUR),
    ("hive_user_gpu_idle_hours", "Booked GPU-hours under the idle load.", "idle_seconds", HOUR),
    ("hive_user_gpu_energy_kwh", "Energy the user's GPUs drew.", "energy_wh", 1 / 1000),
]


class UsageCollector:
    def collect(self):
        totals = (
            DailyUsage.objects.filter(user__isnull=False)
            .values("user__username")
            .annotate(**{field: Sum(field) for _, _, field, _ in COUNTERS})
            .order_by("user__username")
        )
        families = [
            (CounterMetricFamily(name, text, labels=["user"]), field, scale)
            for name, text, field, scale in COUNTERS
        ]
        for row in totals:
            for family, field, scale in families:
                family.add_metric([row["user__username"]], row[field] * scale)
        for family, _, _ in families:
            yield family
