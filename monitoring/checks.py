"""System checks for monitoring settings, so a bad value stops the service at start-up with
a clear message instead of failing inside the probing loop."""

from django.conf import settings
from django.core import checks

MAX_DISK_PATH = 255  # DiskMetric.path's length


@checks.register()
def check_disk_paths(app_configs, **kwargs):
    errors = []
    for path in settings.MONITORING_DISK_PATHS:
        if not path.startswith("/") or "\n" in path or len(path) > MAX_DISK_PATH:
            errors.append(
                checks.Error(
                    f"MONITORING_DISK_PATHS: {path!r} is not an absolute path "
                    f"(one line, at most {MAX_DISK_PATH} characters).",
                    hint="Give comma-separated absolute paths, e.g. /,/home,/data.",
                    id="monitoring.E001",
                )
            )
    return errors


@checks.register()
def check_loop_timing(app_configs, **kwargs):
    """The loop needs a lease that outlasts a cycle and a task that outlasts the lease."""
    interval, lease = settings.MONITORING_INTERVAL, settings.MONITORING_LEASE_SECONDS
    loop, timeout = settings.MONITORING_LOOP_SECONDS, settings.Q_CLUSTER.get("timeout")
    problems = []
    if interval <= 0:
        problems.append(f"MONITORING_INTERVAL is {interval:g}; give a number of seconds above 0.")
    if lease <= interval:
        problems.append(
            f"MONITORING_LEASE_SECONDS ({lease:g}) must be longer than MONITORING_INTERVAL "
            f"({interval:g}), or the loop loses its lease between two cycles."
        )
    if loop <= 0 or (timeout and loop >= timeout):
        problems.append(
            f"MONITORING_LOOP_SECONDS ({loop:g}) must be above 0 and below Q_TIMEOUT "
            f"({timeout}), or django-q2 kills the loop in the middle of a cycle."
        )
    if settings.MONITORING_PROBE_THREADS < 1:
        problems.append("MONITORING_PROBE_THREADS must be at least 1.")
    return [checks.Error(text, id="monitoring.E002") for text in problems]
