"""Audit entries for sign-ins, from django.contrib.auth's signals (connected in
AuditConfig.ready). The apps that own other audited models connect their own receivers
(accesscontrol.audited, monitoring.audited): the audit log stands below them and knows none.
"""

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from core.clients import client_address

from .log import record


@receiver(user_logged_in)
def admin_logged_in(sender, request, user, **kwargs):
    """Staff sign-ins only: they can change who may do what (users' are too many to log)."""
    if user.is_staff or user.is_superuser:
        record("admin.login", actor=user, target=user, **_client(request))


@receiver(user_login_failed)
def login_failed(sender, credentials, request=None, **kwargs):
    # Only the name tried: the credentials also hold the (masked) password.
    username = str(credentials.get("username", ""))[:150]
    record("login.failed", target=username, username=username, **_client(request))


def _client(request) -> dict:
    """Where a sign-in came from: the one address limits and logs use (core.clients)."""
    if request is None:
        return {}
    return {"address": client_address(request)}
