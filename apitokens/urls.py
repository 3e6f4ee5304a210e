"""Pages of API tokens (wired in hiveproject/urls.py under /account/)."""

from django.urls import path

from . import api, views

urlpatterns = [
    path("tokens/", views.tokens, name="api-tokens"),
    path("tokens/<int:pk>/revoke/", views.revoke, name="api-token-revoke"),
]
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = [("tokens", api.TokenViewSet)]
