from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The ground floor every app stands on: time and zones, the client's address and the
    request's bounds, ids, the API's errors, the host-call guard, leases and questions to the
    workers, the SQLite backend. It imports no app of ours (.importlinter checks it)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "core"
    verbose_name = "Service"
