from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "monitoring"

    def ready(self):
        from . import (
            checks,  # noqa: F401  (registers the settings checks)
            supervisor,  # noqa: F401  (the workers' notes for their supervisor)
        )
