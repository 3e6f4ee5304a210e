"""Pages and API routes of protection (wired in hiveproject/urls.py)."""

from django.urls import path

from . import api, views

urlpatterns = [
    path("", views.violations, name="protection-violations"),
]
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = [("violations", api.ViolationViewSet)]
