"""ASGI entry point: HTTP goes to Django, websockets to Channels consumers."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from hiveproject.asgi_handler import OneThreadASGIHandler  # noqa: E402

django_asgi_app = OneThreadASGIHandler()

# Imported after Django is set up: routing modules import models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from core.limits import BodyLimit  # noqa: E402
from hiveproject.routing import websocket_urlpatterns  # noqa: E402


class ScriptPrefix:
    """Under a sub-path the proxy passes /prefix/ws/...: Django strips FORCE_SCRIPT_NAME from
    HTTP paths itself, Channels' router strips only scope["root_path"], so set it from there."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if settings.FORCE_SCRIPT_NAME and not scope.get("root_path"):
            scope = dict(scope, root_path=settings.FORCE_SCRIPT_NAME)
        return await self.app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app),
        "websocket": ScriptPrefix(
            AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    }
)
