"""Pages and API routes of the queue (wired in hiveproject/urls.py)."""

from django.urls import path

from . import views
from .api import PlacementViewSet, QueuedJobViewSet

urlpatterns = [
    path("", views.queue_page, name="queue"),
    path("<int:pk>/cancel", views.cancel, name="queue-cancel"),
]
# (prefix, viewset[, basename]) routes registered on the project's /api/ router.
api_routes = [("queued-jobs", QueuedJobViewSet), ("placement", PlacementViewSet, "placement")]
