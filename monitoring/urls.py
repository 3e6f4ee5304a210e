from django.urls import path

from . import health, metrics, views
from .layout_api import DashboardViewSet

urlpatterns = [
    path("metrics", metrics.metrics, name="metrics"),
    path("healthz", health.healthz, name="healthz"),
    path("hosts/<slug:name>/", views.host_detail, name="host-detail"),
]
# (prefix, viewset, basename) registered on the project's /api/ router; the hosts', GPUs' and
# processes' viewsets are registered in hiveproject/urls.py.
api_routes = [("dashboard", DashboardViewSet, "dashboard")]
