from django.contrib import admin
from django.urls import include, path
from rest_framework.routers import DefaultRouter

from monitoring import api as monitoring_api

router = DefaultRouter()
router.register("hosts", monitoring_api.HostViewSet)
router.register("devices", monitoring_api.DeviceViewSet)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(router.urls)),
    path("api-auth/", include("rest_framework.urls")),
    path("", include("monitoring.urls")),
]
