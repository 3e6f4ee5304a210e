from django.urls import path

from . import views
from .api import DeviceStateViewSet

urlpatterns = [
    path("", views.board, name="overview"),
]
# (prefix, viewset, basename) registered on the project's /api/ router.
api_routes = [("device-states", DeviceStateViewSet, "device-state")]
