"""Personal API tokens: created on the profile page or with a password, used, revoked, expired."""

import hashlib
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apitokens.models import ApiToken
from apitokens.services import issue_token
from audit.models import AuditEvent

from .conftest import bearer

PAGE = "/account/tokens/"


def create_on_page(client, name="laptop", expires=""):
    response = client.post(PAGE, {"name": name, "expires": expires})
    match = re.search(r'<pre id="new-token">([^<]+)</pre>', response.content.decode())
    return response, match and match.group(1)


def test_it_shows_a_new_secret_once_and_keeps_only_its_hash(client, owner):
    client.force_login(owner)
    response, secret = create_on_page(client)
    assert response.status_code == 200 and secret.startswith("hive_")
    token = ApiToken.objects.get()
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(list(ApiToken.objects.values_list()))  # never stored
    assert secret[:12] == token.prefix
    assert secret not in client.get(PAGE).content.decode()
    assert AuditEvent.objects.filter(action="apitoken.create", actor=owner).exists()


def test_a_user_has_several_named_tokens_and_names_do_not_repeat(client, owner):
    client.force_login(owner)
    create_on_page(client, "laptop")
    create_on_page(client, "cluster", "30")
    response, secret = create_on_page(client, "laptop")
    assert response.status_code == 400 and secret is None
    assert "already have a token named" in response.content.decode()
    assert sorted(ApiToken.objects.values_list("name", flat=True)) == ["cluster", "laptop"]
    expires = ApiToken.objects.get(name="cluster").expires
    assert timedelta(days=29) < expires - timezone.now() <= timedelta(days=30)


@pytest.mark.parametrize("keyword", ["Bearer", "Token", "bearer"])
def test_a_token_signs_requests_in(client, owner_secret, keyword):
    response = client.get("/api/devices/", HTTP_AUTHORIZATION=f"{keyword} {owner_secret}")
    assert response.status_code == 200
    assert ApiToken.objects.get().last_used is not None


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("Bearer hive_not-a-real-token", "Invalid token."),
        ("Bearer", "Write the header as 'Bearer <token>'."),
        ("Bearer a b", "Write the header as 'Bearer <token>'."),
    ],
)
def test_a_bad_token_is_refused_with_a_reason(client, owner_secret, header, message):
    response = client.get("/api/devices/", HTTP_AUTHORIZATION=header)
    assert response.status_code == 403
    assert response.json() == {"detail": message}


def test_a_revoked_token_stops_working_at_once(client, owner, owner_secret):
    client.force_login(owner)
    token = ApiToken.objects.get()
    assert client.post(f"{PAGE}{token.pk}/revoke/").status_code == 302
    client.logout()
    response = client.get("/api/devices/", **bearer(owner_secret))
    assert response.status_code == 403
    assert response.json()["detail"] == "This token was revoked."
    assert AuditEvent.objects.filter(action="apitoken.revoke").count() == 1


def test_an_expired_token_is_refused_saying_so(client, owner, owner_secret):
    ApiToken.objects.update(expires=timezone.now() - timedelta(seconds=1))
    response = client.get("/api/devices/", **bearer(owner_secret))
    assert response.status_code == 403
    assert "expired" in response.json()["detail"]


def test_a_disabled_users_token_is_refused(client, owner, owner_secret):
    owner.is_active = False
    owner.save()
    response = client.get("/api/devices/", **bearer(owner_secret))
    assert response.status_code == 403 and "disabled" in response.json()["detail"]


def test_a_token_acts_as_its_owner_only(client, owner, other_user, owner_secret):
    issue_token(other_user, "theirs")
    names = [t["name"] for t in client.get("/api/tokens/", **bearer(owner_secret)).json()]
    assert names == ["laptop"]


# --- the API -------------------------------------------------------------------------------


def login_api(client, username="owner", password="pw-owner-1", **extra):  # noqa: S107
    body = {"username": username, "password": password, "name": "cli", **extra}
    return client.post("/api/tokens/login/", body, content_type="application/json")


def test_a_password_buys_a_token(client, owner):
    response = login_api(client)
    assert response.status_code == 201
    secret = response.json()["token"]
    assert response.json()["state"] == "active" and response.json()["name"] == "cli"
    me = client.get("/api/tokens/", **bearer(secret)).json()
    assert [t["name"] for t in me] == ["cli"] and "token" not in me[0]


def test_a_wrong_password_buys_nothing(client, owner):
    response = login_api(client, password="nope")
    assert response.status_code == 403
    assert response.json()["detail"] == "Wrong user name or password."
    assert not ApiToken.objects.exists()


def test_an_expiry_in_the_past_is_refused(client, owner):
    response = login_api(client, expires="2020-01-01T00:00:00Z")
    assert response.status_code == 400
    assert response.json()["expires"] == ["The expiry must be in the future."]


def test_a_signed_in_browser_creates_a_token_but_a_token_cannot(client, owner, owner_secret):
    body = {"name": "more"}
    refused = client.post(
        "/api/tokens/", body, content_type="application/json", **bearer(owner_secret)
    )
    assert refused.status_code == 403 and "password" in refused.json()["detail"]
    client.force_login(owner)
    created = client.post("/api/tokens/", body, content_type="application/json")
    assert created.status_code == 201 and created.json()["token"].startswith("hive_")


@pytest.mark.parametrize(
    ("persona", "code"), [(None, 403), ("owner", 204), ("other_user", 404), ("admin_user", 404)]
)
def test_only_the_owner_revokes_through_the_api(client, owner_secret, persona, code, request):
    if persona:
        client.force_login(request.getfixturevalue(persona))
    token = ApiToken.objects.get()
    assert client.delete(f"/api/tokens/{token.pk}/").status_code == code
    token.refresh_from_db()
    assert (token.revoked is not None) == (code == 204)


def test_a_token_may_revoke_itself(client, owner_secret):
    token = ApiToken.objects.get()
    assert client.delete(f"/api/tokens/{token.pk}/", **bearer(owner_secret)).status_code == 204
    assert client.get("/api/tokens/", **bearer(owner_secret)).status_code == 403


@pytest.mark.profile  # its SQL differs by database: run on PostgreSQL too
def test_a_signed_request_finds_its_token_and_user_in_one_query(client, owner):
    """The token and its user come from one query by the digest's unique index."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    token, secret = issue_token(owner, "laptop", timezone.now() + timedelta(days=3))
    ApiToken.objects.filter(pk=token.pk).update(last_used=timezone.now())
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/", **bearer(secret)).status_code == 200
    lookups = [q["sql"] for q in queries if "apitokens_apitoken" in q["sql"]]
    assert len(lookups) == 1 and "JOIN" in lookups[0] and '"digest" = ' in lookups[0]
    assert client.get("/api/", **bearer(secret + "x")).status_code == 403
