from django.apps import AppConfig


class AccesscontrolConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accesscontrol"
    verbose_name = "Access control"

    def ready(self):
        from . import (
            firstadmin,  # noqa: F401  (removes the first admin's password file at sign-in)
            receivers,  # noqa: F401  (connects the signal receivers)
        )
