from django.contrib.auth.views import LoginView
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", LoginView.as_view()),
    path("openid/", include("oidc_provider.urls", namespace="oidc_provider")),
]
