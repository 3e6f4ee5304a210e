from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccesscontrolConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accesscontrol"
    verbose_name = "Access control"

    def ready(self):
        from . import (
            audited,  # noqa: F401  (connects the audit log's receivers of grants and bans)
            checks,  # noqa: F401  (registers what an upgrade left for the admin)
            firstadmin,  # noqa: F401  (removes the first admin's password file at sign-in)
            receivers,  # noqa: F401  (connects the signal receivers)
        )
        from .changes import install_triggers

        post_migrate.connect(install_triggers, sender=self)
