from django.urls import path

from . import health, metrics, views

urlpatterns = [
    path("metrics", metrics.metrics, name="metrics"),
    path("healthz", health.healthz, name="healthz"),
    path("dashboard/layout", views.dashboard_layout, name="dashboard-layout"),
    path("hosts/<slug:name>/", views.host_detail, name="host-detail"),
]
