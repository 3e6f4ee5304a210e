import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils.module_loading import module_has_submodule

from monitoring.loop import ensure_schedules
from monitoring.supervisor import (
    Supervisor,
    catch_stop_signals,
    check_apart,
    run_until_signalled,
    stop_group,
)

ASGI_APP = "hiveproject.asgi:application"
FILE_MAIL = "django.core.mail.backends.filebased.EmailBackend"


def ensure_app_schedules() -> None:
    """Schedules of the apps above monitoring (their ``schedules.ensure_schedules``), found
    by name so that monitoring imports none of them."""
    for app in apps.get_app_configs():
        if not module_has_submodule(app.module, "schedules"):
            continue
        ensure = getattr(importlib.import_module(f"{app.name}.schedules"), "ensure_schedules", None)
        if ensure is not None:
            ensure()


def access_log_options(access_log: str) -> list[str]:
    """daphne's options for its access log: a file (relative: in the data directory), the
    console ("-"), or none (""), which takes -v 0: at its default verbosity daphne writes a
    line per request to the console."""
    if not access_log:
        return ["-v", "0"]
    if access_log == "-":
        return ["--access-log", "-"]
    return ["--access-log", str(Path(settings.HIVE_DATA_DIR) / access_log)]


def web_command(bind: str, port: int, access_log: str = "") -> list[str]:
    """The web process: daphne with the bounds on request heads and bodies that nginx has
    (core.webserver), since --bind may expose it directly; as the systemd unit runs it."""
    options = ["-b", bind, "-p", str(port), *access_log_options(access_log)]
    return [sys.executable, "-m", "core.webserver", *options, ASGI_APP]


class Command(BaseCommand):
    help = (
        "Run the web app (daphne) and the background workers (a supervised django-q2 "
        "cluster) together. Ctrl-C or SIGTERM stops both, every process of theirs, and "
        "returns only then. A stalled or exited cluster is restarted; if the web app stops "
        "by itself, the workers are stopped too."
    )

    requires_system_checks = []  # check_apart() runs them, in a process of their own

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1", help="address to listen on")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--access-log",
            default=None,
            help="where daphne writes a line per request: a file (relative: in the data "
            "directory), - for the console, '' for none (default: the ACCESS_LOG setting)",
        )

    def handle(self, bind, port, access_log=None, **options):
        check_apart()
        stopping = catch_stop_signals()  # before any child exists: none is left behind
        ensure_schedules()  # the probing loop's watchdog and history retention
        ensure_app_schedules()  # reminders and usage of reservations
        access_log = settings.ACCESS_LOG if access_log is None else access_log
        web = subprocess.Popen(
            web_command(bind, port, access_log),
            process_group=0,  # Ctrl-C reaches serve alone, which stops all in order
        )
        self.stdout.write(f"Serving on http://{bind}:{port}/ (Ctrl-C to stop)")
        if settings.EMAIL_BACKEND == FILE_MAIL:  # nobody receives it: the admin should know
            self.stdout.write(f"Mail is not sent: each one is a file in {settings.EMAIL_FILE_PATH}"
                              " (set EMAIL_HOST to send it)")  # fmt: skip
        workers = Supervisor()

        def web_exited():
            return web.poll() is not None and "the web app stopped by itself"

        try:
            why = run_until_signalled(workers, stopping, also=web_exited)
        finally:
            self._stop(web, workers)
        if why == "the web app stopped by itself":
            self.stderr.write(f"{why} (code {web.returncode}); stopped the workers")
            sys.exit(1)
        self.stdout.write("Stopped.")

    def _stop(self, web, workers):
        """Web and workers stop side by side: SIGTERM to daphne (it closes its connections),
        while the workers stop; whatever is left of either after the grace is killed."""
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGTERM)
        deadline = time.monotonic() + workers.grace
        workers.stop()
        stop_group(web, max(0.0, deadline - time.monotonic()), first=signal.SIGTERM)
