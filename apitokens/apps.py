from django.apps import AppConfig


class ApiTokensConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apitokens"
    verbose_name = "API tokens"

    def ready(self):
        from . import signin  # noqa: F401  (counts failed sign-ins)
