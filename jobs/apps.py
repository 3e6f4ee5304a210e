from django.apps import AppConfig


class JobsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "jobs"

    def ready(self):
        from allocation import holders

        from . import permissions, receivers  # noqa: F401  (register rules and receivers)
        from .models import task_holdings

        holders.register(holders.TASK, task_holdings)
