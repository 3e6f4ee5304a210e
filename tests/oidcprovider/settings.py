"""A real OpenID Connect provider for the sign-in tests: django-oidc-provider in a Django
project of its own (its own process and SQLite file), never the service's settings."""

import os
from pathlib import Path

WORKDIR = Path(os.environ["OIDC_TEST_DIR"])
SECRET_KEY = "the test provider's own, for tests only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.oidcprovider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": WORKDIR / "provider.db"}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
SITE_URL = os.environ["OIDC_TEST_SITE_URL"]
# Each person's claims come from the people file the test wrote (tests/directoryparts.py).
OIDC_USERINFO = "tests.oidcprovider.claims.userinfo"
OIDC_EXTRA_SCOPE_CLAIMS = "tests.oidcprovider.claims.LabClaims"
