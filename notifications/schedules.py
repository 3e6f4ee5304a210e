"""The scheduled work of notifications: none any more. Deliveries (first tries and retries)
are sent by the notifications sender, a process of its own (notifications.sender); the
retry schedule that ran on the shared workers is removed where an earlier version left it."""

from django_q.models import Schedule

OLD_SCHEDULES = ["notifications: retries"]


def ensure_schedules() -> None:
    Schedule.objects.filter(name__in=OLD_SCHEDULES).delete()
