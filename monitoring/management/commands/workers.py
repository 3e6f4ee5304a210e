from django.core.management.base import BaseCommand

from monitoring.loop import ensure_schedules
from monitoring.management.commands.serve import ensure_app_schedules
from monitoring.supervisor import (
    Supervisor,
    catch_stop_signals,
    check_apart,
    run_until_signalled,
)


class Command(BaseCommand):
    help = (
        "Run the background workers (a django-q2 cluster) under a supervisor that restarts "
        "the cluster when it stalls (WORKERS_STALL_SECONDS) and, on SIGINT or SIGTERM, stops "
        "all of its processes (SIGKILL after WORKERS_STOP_GRACE_SECONDS) before it returns."
    )

    requires_system_checks = []  # check_apart() runs them, in a process of their own

    def handle(self, **options):
        check_apart()
        stopping = catch_stop_signals()
        ensure_schedules()  # the probing loop's watchdog and history retention
        ensure_app_schedules()  # reminders and usage of reservations
        supervisor = Supervisor()
        try:
            why = run_until_signalled(supervisor, stopping)
        finally:
            supervisor.stop()
        self.stdout.write(f"Workers stopped ({why}).")
