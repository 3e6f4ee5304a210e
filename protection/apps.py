"""Reservation protection: intruders on reserved GPUs are recorded and handled."""

from django.apps import AppConfig
from django.core import checks


class ProtectionConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "protection"

    def ready(self):
        from monitoring.live import register_intruders

        from . import permissions, receivers  # noqa: F401  (rules and signal receivers)
        from .models import intruders

        register_intruders(intruders)  # the board marks them live

        checks.register(check_settings)


def check_settings(app_configs=None, **kwargs):
    """Bad PROTECTION_* settings are reported at start, not at the first intruder."""
    from django.utils.module_loading import import_string

    from . import config

    errors = []
    for read in (config.level, config.allow_rules, config.handler_entries):
        try:
            read()
        except (ValueError, TypeError) as exc:
            errors.append(checks.Error(str(exc), id="protection.E001"))
    try:
        entries = config.handler_entries()
    except ValueError:
        entries = []
    for entry in entries:
        try:
            import_string(entry["handler"])
        except ImportError as exc:
            errors.append(checks.Error(f"VIOLATION_HANDLERS: {exc}", id="protection.E002"))
    return errors
