from django.urls import path

from . import api, metrics, views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("metrics", metrics.metrics, name="metrics"),
    path("dashboard/layout", views.dashboard_layout, name="dashboard-layout"),
    # Until the API router registers "processes" (hiveproject/urls.py), serve it here.
    path("api/processes/", api.ProcessViewSet.as_view({"get": "list"}), name="process-list"),
]
