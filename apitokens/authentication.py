"""DRF authentication by personal token: ``Authorization: Bearer <secret>`` (or ``Token``)."""

from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from accesscontrol.zones import profile_zone

from .services import token_for_secret

KEYWORDS = ("bearer", "token")


class TokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower().decode(errors="replace") not in KEYWORDS:
            return None  # not ours: other authentication classes may answer
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Write the header as 'Bearer <token>'.")
        try:
            token = token_for_secret(parts[1].decode())
        except (UnicodeDecodeError, ValidationError) as exc:
            message = exc.messages[0] if isinstance(exc, ValidationError) else "Invalid token."
            raise exceptions.AuthenticationFailed(message) from None
        # DRF authenticates inside the view, after accesscontrol.zones.UserTimeZoneMiddleware
        # saw an anonymous request: the token's user gets their zone here (the middleware
        # still deactivates it when the request ends).
        user = token.user
        try:
            profile = user.profile  # joined with the token (services.token_for_secret)
        except ObjectDoesNotExist:
            profile = None
        user.hive_zone = profile_zone(profile)
        timezone.activate(user.hive_zone)
        return user, token

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Documents the token in the OpenAPI schema (drf-spectacular finds it by subclassing)."""

    target_class = TokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token from /account/tokens/ or `hive login`.",
        }
