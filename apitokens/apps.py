from django.apps import AppConfig
from django.core.management import call_command
from django.db.models.signals import post_migrate


def create_cache_table(sender, using="default", **kwargs):
    """The database cache's table (embedded profile: the shared sign-in counters) comes
    with every migrate, so no install step can forget it; nothing happens for Redis."""
    call_command("createcachetable", database=using, verbosity=0)


class ApiTokensConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apitokens"
    verbose_name = "API tokens"

    def ready(self):
        from . import signin  # noqa: F401  (counts failed sign-ins)

        post_migrate.connect(create_cache_table, sender=self)
