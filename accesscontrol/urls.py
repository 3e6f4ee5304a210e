"""Pages and API routes of access control (wired in hiveproject/urls.py)."""

from django.urls import path

from . import api, views

urlpatterns = [
    path("week/", views.week, name="access-week"),
    path("signup/", views.signup, name="access-signup"),
    path("profile/", views.profile, name="profile"),
]
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = [
    ("grants", api.GrantViewSet),
    ("access", api.AccessViewSet),
]
