"""Websocket routes of all apps (wiring only)."""

websocket_urlpatterns = []
