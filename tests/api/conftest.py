"""Fixtures for API-wide tests: a small lab anyone signed in may book, and fresh throttles."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from apitokens.services import issue_token
from monitoring.models import Device, Host


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """Sign-in failures and DRF throttle counts live in the cache; each test starts at zero."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def lab(db):
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    return [Device.objects.create(host=host, index=i, uuid=f"GPU-{i}") for i in range(2)]


@pytest.fixture
def everyone_may_book(db, owner, other_user, admin_user):
    ensure_default_group()


@pytest.fixture
def owner_secret(owner):
    return issue_token(owner, "laptop")[1]


def bearer(secret: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def tomorrow(hour: int):
    day = timezone.localtime() + timedelta(days=1)
    return day.replace(hour=hour, minute=0, second=0, microsecond=0)
