import importlib
import signal
import subprocess
import sys
import time

from django.apps import apps
from django.core.management.base import BaseCommand
from django.utils.module_loading import module_has_submodule

from monitoring.loop import ensure_schedules


def ensure_app_schedules() -> None:
    """Schedules of the apps above monitoring (their ``schedules.ensure_schedules``), found
    by name so that monitoring imports none of them."""
    for app in apps.get_app_configs():
        if not module_has_submodule(app.module, "schedules"):
            continue
        ensure = getattr(importlib.import_module(f"{app.name}.schedules"), "ensure_schedules", None)
        if ensure is not None:
            ensure()


class Command(BaseCommand):
    help = (
        "Run the web app (daphne) and the background workers (django-q2 cluster) together; "
        "Ctrl-C stops both cleanly. If either stops by itself, the other is stopped too."
    )

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1", help="address to listen on")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, bind, port, **options):
        ensure_schedules()  # the probing loop's watchdog and history retention
        ensure_app_schedules()  # reminders and usage of reservations
        python = sys.executable
        processes = {
            "web": subprocess.Popen(
                [
                    python,
                    "-m",
                    "daphne",
                    "-b",
                    bind,
                    "-p",
                    str(port),
                    "hiveproject.asgi:application",
                ]
            ),
            "workers": subprocess.Popen([python, "manage.py", "qcluster"]),
        }
        self.stdout.write(f"Serving on http://{bind}:{port}/ (Ctrl-C to stop)")
        stopping = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stopping.append(True))
        while not stopping and all(p.poll() is None for p in processes.values()):
            time.sleep(0.2)
        exited = [name for name, p in processes.items() if p.poll() is not None]
        self._stop(processes)
        if exited and not stopping:
            self.stderr.write(f"{', '.join(exited)} stopped unexpectedly; stopped the rest")
            sys.exit(1)
        self.stdout.write("Stopped.")

    def _stop(self, processes):
        for proc in processes.values():
            if proc.poll() is None:
                proc.terminate()  # SIGTERM: SIGINT may be ignored in background jobs
        deadline = time.monotonic() + 15
        for proc in processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
