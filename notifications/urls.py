"""Pages and API routes of notifications (wired in hiveproject/urls.py)."""

from django.urls import path

from . import api, views

urlpatterns = [
    path("", views.channels_page, name="notifications"),
    path("<int:pk>/edit/", views.edit_channel, name="notifications-edit"),
    path("<int:pk>/delete/", views.delete_channel, name="notifications-delete"),
]
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = [("notification-channels", api.ChannelViewSet)]
