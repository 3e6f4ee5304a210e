"""Fair use: idle bookings warned, then given back (unless their owner keeps them)."""

from django.apps import AppConfig


class FairuseConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "fairuse"
    verbose_name = "Fair use"

    def ready(self):
        from . import permissions, receivers  # noqa: F401  (rules and signal receivers)
