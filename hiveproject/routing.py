"""Websocket routes of all apps (wiring only)."""

from django.urls import path

from monitoring.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/monitoring/live/", LiveConsumer.as_asgi()),
]
