"""Rate limits: failed sign-ins per name and address everywhere, and the token endpoints."""

import pytest
from rest_framework.throttling import ScopedRateThrottle

from apitokens.models import ApiToken

from .conftest import bearer

# Sign-in limits are about passwords checked as in production, at production's cost.
pytestmark = pytest.mark.usefixtures("production_hashers")

LOGIN = "/accounts/login/"


def sign_in(client, password, address="10.1.1.1", url=LOGIN, username="owner"):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def fail_five_times(client, settings, **kwargs):
    settings.LOGIN_ATTEMPTS = 5
    for _ in range(5):
        response = sign_in(client, "nope", **kwargs)
        assert "didn't match" in response.content.decode()


def test_the_login_form_locks_a_name_after_five_failures(client, owner, settings):
    fail_five_times(client, settings)
    response = sign_in(client, "pw-owner-1")  # even the right password now
    assert response.status_code == 200
    assert (
        "Too many failed sign-ins for this user name from your address."
        in response.content.decode()
    )
    assert "Try again in 5 minutes." in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_another_address_or_name_is_not_locked(client, owner, other_user, settings):
    fail_five_times(client, settings)
    assert sign_in(client, "pw-owner-1", address="10.2.2.2").status_code == 302
    client.logout()
    assert sign_in(client, "pw-other-1", username="other").status_code == 302


def test_a_success_clears_the_count(client, owner, settings):
    settings.LOGIN_ATTEMPTS = 5
    for _ in range(4):
        sign_in(client, "nope")
    assert sign_in(client, "pw-owner-1").status_code == 302
    client.logout()
    for _ in range(4):
        sign_in(client, "nope")
    assert sign_in(client, "pw-owner-1").status_code == 302


@pytest.mark.parametrize("url", ["/admin/login/", "/api-auth/login/"])
def test_other_login_forms_are_locked_too(client, admin_user, settings, url):
    settings.LOGIN_ATTEMPTS = 5
    for _ in range(5):
        sign_in(client, "nope", username="boss", url=url)
    response = sign_in(client, "pw-boss-1", username="boss", url=url)
    assert response.status_code == 200 and "_auth_user_id" not in client.session


def test_the_api_login_is_locked_with_a_429(client, owner, settings):
    fail_five_times(client, settings, address="127.0.0.1")
    body = {"username": "owner", "password": "pw-owner-1", "name": "cli"}
    response = client.post("/api/tokens/login/", body, content_type="application/json")
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.json()["detail"]
    assert not ApiToken.objects.exists()


def test_failed_api_logins_count_towards_the_lock(client, owner, settings):
    settings.LOGIN_ATTEMPTS = 3
    body = {"username": "owner", "password": "nope", "name": "cli"}
    codes = [
        client.post("/api/tokens/login/", body, content_type="application/json").status_code
        for _ in range(4)
    ]
    assert codes == [403, 403, 403, 429]


def test_the_token_endpoints_are_rate_limited(client, owner, owner_secret, monkeypatch):
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"tokens": "3/minute"})
    codes = [client.get("/api/tokens/", **bearer(owner_secret)).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    response = client.get("/api/tokens/", **bearer(owner_secret))
    assert "throttled" in response.json()["detail"]
    assert client.get("/api/devices/", **bearer(owner_secret)).status_code == 200  # others not
