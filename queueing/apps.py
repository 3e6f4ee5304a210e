from django.apps import AppConfig


class QueueingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "queueing"
    verbose_name = "Queue"

    def ready(self):
        from allocation import holders

        from . import permissions, receivers  # noqa: F401  (rules and signal receivers)
        from .models import claim_holdings

        holders.register(holders.QUEUE_RUN, claim_holdings)
