from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "monitoring"

    def ready(self):
        from . import (
            audited,  # noqa: F401  (connects the audit log's receivers of SSH alarms)
            checks,  # noqa: F401  (registers the settings checks)
            dbversion,  # noqa: F401  (registers the check that the database is not newer)
            supervisor,  # noqa: F401  (the workers' notes for their supervisor)
        )
