from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

import accesscontrol.signin
import accesscontrol.urls
import accounting.urls
import apitokens.signin
import apitokens.urls
import apitokens.views
import board.urls
import fairuse.urls
import jobs.urls
import monitoring.urls
import notifications.urls
import protection.urls
import queueing.urls
import reservations.urls
from hiveproject.favicon import FaviconView
from monitoring import api as monitoring_api

# The admin's login says when a name is locked, as the site's does (apitokens.signin).
admin.site.login_form = apitokens.signin.AdminSignInForm

router = DefaultRouter()
router.register("hosts", monitoring_api.HostViewSet)
router.register("devices", monitoring_api.DeviceViewSet)
router.register("processes", monitoring_api.ProcessViewSet, basename="process")
for app_urls in (
    accesscontrol.urls,
    reservations.urls,
    jobs.urls,
    protection.urls,
    queueing.urls,
    apitokens.urls,
    fairuse.urls,
    accounting.urls,
    notifications.urls,
    board.urls,
    monitoring.urls,
):
    for route in app_urls.api_routes:  # (prefix, viewset[, basename])
        router.register(*route)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("favicon.ico", FaviconView.as_view()),
    # Login forms that say when a name is locked after failed sign-ins (apitokens.signin).
    path("accounts/login/", apitokens.views.sign_in, name="login"),
    path("api-auth/login/", apitokens.views.api_sign_in),
    # Reset mails limited per address and recipient (apitokens.views.password_reset).
    path("accounts/password_reset/", apitokens.views.password_reset, name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    # Sign-in with the lab's OIDC provider (404 unless configured: accesscontrol.signin).
    path(
        "oidc/authenticate/",
        accesscontrol.signin.provider_sign_in,
        name="oidc_authentication_init",
    ),
    path(
        "oidc/callback/",
        accesscontrol.signin.provider_callback,
        name="oidc_authentication_callback",
    ),
    path("account/", include("apitokens.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Namespaced: the API's route names ("job-list"...) would otherwise be the pages' too.
    path("api/", include((router.urls, "api"))),
    path("api-auth/", include("rest_framework.urls")),
    path("access/", include("accesscontrol.urls")),
    path("reservations/", include("reservations.urls")),
    path("jobs/", include("jobs.urls")),
    path("protection/", include("protection.urls")),
    path("queue/", include("queueing.urls")),
    path("fairuse/", include("fairuse.urls")),
    path("usage/", include("accounting.urls")),
    path("notifications/", include("notifications.urls")),
    path("", include("board.urls")),
    path("", include("monitoring.urls")),
]
# A URL no route matches answers JSON under /api/, like every other API error.
handler404 = "core.api_errors.not_found"
handler500 = "core.api_errors.server_error"
