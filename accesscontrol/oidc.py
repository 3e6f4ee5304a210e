"""Sign in with the lab's OpenID Connect provider (mozilla-django-oidc), off unless configured.

The provider's claims name the web user (HIVE_OIDC_USERNAME_CLAIM, matched to our user of
that name, never by mail: a provider that lets people set their mail would otherwise hand
out others' accounts), the UNIX account on every host (HIVE_OIDC_UNIX_NAME_CLAIM, the same
rule as the directory's: accesscontrol.directory.take_unix_name refuses root and the other
accounts nobody may run as) and, optionally, the groups (HIVE_OIDC_GROUPS_CLAIM, mirrored
as the directory's are). A provider that cannot be reached sends the visitor back to the
sign-in page, which says so.
"""

import logging

import requests
from django.conf import settings
from django.contrib import messages
from django.shortcuts import resolve_url
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from .directory import mirror_groups, take_unix_name
from .services import is_service_account_name

logger = logging.getLogger(__name__)


class ProviderUnavailable(Exception):
    """The provider did not answer the sign-in as it should; ``str()`` tells the visitor."""


class ProviderBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend with our user names, UNIX account and groups."""

    def authenticate(self, request, **kwargs):
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as exc:
            logger.warning("signing in with the OIDC provider failed: %s", exc)
            refused = exc.response is not None
            what = (
                f"the provider refused it (HTTP {exc.response.status_code})"
                if refused
                else "the provider could not be asked"
            )
            raise ProviderUnavailable(
                f"Signing in with {settings.HIVE_OIDC_PROVIDER_NAME} did not work: {what}. "
                "Try again; tell an admin if it goes on."
            ) from None

    def verify_claims(self, claims):
        name = self.get_username(claims)
        usable = 0 < len(name) <= 150 and not is_service_account_name(name)
        return usable and super().verify_claims(claims)

    def get_username(self, claims):
        name = claims.get(settings.HIVE_OIDC_USERNAME_CLAIM)
        return name.strip() if isinstance(name, str) else ""

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.filter(username=self.get_username(claims))

    def create_user(self, claims):
        user = self.UserModel.objects.create_user(self.get_username(claims))
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        for field, claim in (("first_name", "given_name"), ("last_name", "family_name")):
            setattr(user, field, str(claims.get(claim, getattr(user, field)))[:150])
        user.email = str(claims.get("email", user.email))[:254]
        user.save(update_fields=["first_name", "last_name", "email"])
        self._take_unix_name(user, claims)
        self._mirror_groups(user, claims)
        return user

    def _take_unix_name(self, user, claims) -> None:
        claim = settings.HIVE_OIDC_UNIX_NAME_CLAIM
        if claim and claim in claims:
            name = claims[claim]
            take_unix_name(user, name if isinstance(name, str) else "", None, "the provider")

    def _mirror_groups(self, user, claims) -> None:
        claim = settings.HIVE_OIDC_GROUPS_CLAIM
        if not claim or claim not in claims:
            return
        names = claims[claim]
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list):
            logger.warning("the provider's %s claim is not a list of names: ignored", claim)
            return
        mirror_groups(
            user, [name for name in names if isinstance(name, str) and 0 < len(name) <= 150]
        )


class ProviderSignIn(OIDCAuthenticationRequestView):
    """/oidc/authenticate/ (accesscontrol.signin: only while a provider is configured)."""


class ProviderCallback(OIDCAuthenticationCallbackView):
    """/oidc/callback/: a failure goes back to the sign-in page, which says what happened."""

    failure_reason = ""

    @property
    def failure_url(self):
        return resolve_url(settings.LOGIN_URL)

    def get(self, request):
        try:
            return super().get(request)
        except ProviderUnavailable as exc:
            self.failure_reason = str(exc)
            return self.login_failure()

    def login_failure(self):
        messages.error(
            self.request,
            self.failure_reason
            or f"Signing in with {settings.HIVE_OIDC_PROVIDER_NAME} did not succeed.",
        )
        return super().login_failure()
