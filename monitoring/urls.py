from django.urls import path

from . import metrics, views

urlpatterns = [
    path("metrics", metrics.metrics, name="metrics"),
    path("dashboard/layout", views.dashboard_layout, name="dashboard-layout"),
    path("hosts/<slug:name>/", views.host_detail, name="host-detail"),
]
