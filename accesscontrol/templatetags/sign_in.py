"""What the sign-in page offers: a local account, the lab's directory, its OIDC provider."""

from django import template
from django.conf import settings

from accesscontrol.directory import directory_enabled
from accesscontrol.oidc import provider_enabled

register = template.Library()


@register.simple_tag
def sign_in_ways() -> dict:
    return {
        "directory": directory_enabled(),
        "provider": settings.HIVE_OIDC_PROVIDER_NAME if provider_enabled() else "",
    }
