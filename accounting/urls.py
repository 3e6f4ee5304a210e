"""Pages and API routes of accounting (wired in hiveproject/urls.py)."""

from django.urls import path

from . import api, views

urlpatterns = [path("", views.usage_page, name="usage")]
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = [("usage", api.UsageViewSet)]
