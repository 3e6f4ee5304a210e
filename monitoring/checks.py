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
