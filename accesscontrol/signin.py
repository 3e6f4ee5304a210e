"""Which ways in the sign-in page offers (a local account, the lab's directory, its OIDC
provider), and the provider's two pages.

Kept light on purpose: python-ldap, mozilla-django-oidc and the crypto they bring load only
where they are configured (every web process carried about 16 MiB more otherwise), so the
provider's pages import their views when first asked, and answer 404 while it is off.
"""

from functools import cache

from django.conf import settings
from django.http import Http404

DIRECTORY_BACKEND = "accesscontrol.directory.DirectoryBackend"
PROVIDER_BACKEND = "accesscontrol.oidc.ProviderBackend"


def directory_enabled() -> bool:
    return DIRECTORY_BACKEND in settings.AUTHENTICATION_BACKENDS


def provider_enabled() -> bool:
    return PROVIDER_BACKEND in settings.AUTHENTICATION_BACKENDS


def ways() -> dict:
    """For the sign-in page: is the directory on, and the provider's name ("" if off)."""
    return {
        "directory": directory_enabled(),
        "provider": settings.HIVE_OIDC_PROVIDER_NAME if provider_enabled() else "",
    }


@cache
def _views():
    from .oidc import ProviderCallback, ProviderSignIn

    return ProviderSignIn.as_view(), ProviderCallback.as_view()


def provider_sign_in(request):
    """/oidc/authenticate/: off to the provider, which sends the person back to the callback."""
    if not provider_enabled():
        raise Http404("No sign-in provider is configured.")
    return _views()[0](request)


def provider_callback(request):
    """/oidc/callback/: the provider's answer (a code), traded for who the person is."""
    if not provider_enabled():
        raise Http404("No sign-in provider is configured.")
    return _views()[1](request)
