"""Accounting: GPU-hours reserved, used and idle, and energy, per user, group and host."""

from django.apps import AppConfig


class AccountingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accounting"
