from django.contrib import admin
from django.urls import include, path
from rest_framework.routers import DefaultRouter

import accesscontrol.urls
import jobs.urls
import reservations.urls
from monitoring import api as monitoring_api

router = DefaultRouter()
router.register("hosts", monitoring_api.HostViewSet)
router.register("devices", monitoring_api.DeviceViewSet)
router.register("processes", monitoring_api.ProcessViewSet, basename="process")
for app_urls in (accesscontrol.urls, reservations.urls, jobs.urls):
    for prefix, viewset in app_urls.api_routes:
        router.register(prefix, viewset)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include(router.urls)),
    path("api-auth/", include("rest_framework.urls")),
    path("access/", include("accesscontrol.urls")),
    path("reservations/", include("reservations.urls")),
    path("jobs/", include("jobs.urls")),
    path("", include("monitoring.urls")),
]
