"""Pages and API routes of fair use (wired in hiveproject/urls.py)."""

from django.urls import path

from . import api, views

urlpatterns = [
    path("idle/", views.idle_page, name="fairuse-idle"),
    path("idle/<int:pk>/keep/", views.keep, name="fairuse-keep"),
]
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = [("idle-notices", api.IdleNoticeViewSet)]
