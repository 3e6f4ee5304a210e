"""Who may see and change tokens: the profile page, its revoke button and the admin."""

import pytest

from apitokens.models import ApiToken
from apitokens.services import issue_token

PAGE = "/account/tokens/"
PERSONAS = [None, "owner", "other_user", "admin_user"]


@pytest.fixture
def owners_token(owner):
    return issue_token(owner, "owners laptop")[0]


def sign_in_as(client, persona, request):
    if persona:
        client.force_login(request.getfixturevalue(persona))


@pytest.mark.parametrize("persona", PERSONAS)
def test_the_page_shows_only_ones_own_tokens(client, owners_token, persona, request):
    sign_in_as(client, persona, request)
    response = client.get(PAGE)
    if persona is None:
        assert response.status_code == 302 and "/accounts/login/" in response.url
        return
    assert response.status_code == 200
    assert ("owners laptop" in response.content.decode()) == (persona == "owner")


@pytest.mark.parametrize(
    ("persona", "code"), [(None, 302), ("owner", 302), ("other_user", 404), ("admin_user", 404)]
)
def test_only_the_owner_revokes_on_the_page(client, owners_token, persona, code, request):
    sign_in_as(client, persona, request)
    assert client.post(f"{PAGE}{owners_token.pk}/revoke/").status_code == code
    owners_token.refresh_from_db()
    assert (owners_token.revoked is not None) == (persona == "owner")


def test_revoking_needs_a_post(client, owner, owners_token):
    client.force_login(owner)
    assert client.get(f"{PAGE}{owners_token.pk}/revoke/").status_code == 405
    owners_token.refresh_from_db()
    assert owners_token.revoked is None


def test_a_new_token_without_a_name_is_refused(client, owner):
    client.force_login(owner)
    response = client.post(PAGE, {"name": "", "expires": ""})
    assert response.status_code == 400 and not ApiToken.objects.exists()


@pytest.mark.parametrize(("persona", "code"), [(None, 302), ("owner", 302), ("admin_user", 200)])
def test_admins_see_every_token_in_the_admin_and_revoke(
    client, owners_token, persona, code, request
):
    sign_in_as(client, persona, request)
    assert client.get("/admin/apitokens/apitoken/").status_code == code
    data = {"action": "revoke", "_selected_action": [owners_token.pk]}
    client.post("/admin/apitokens/apitoken/", data)
    owners_token.refresh_from_db()
    assert (owners_token.revoked is not None) == (persona == "admin_user")


@pytest.mark.parametrize("persona", PERSONAS)
def test_the_token_list_api_is_per_user(client, owners_token, persona, request):
    sign_in_as(client, persona, request)
    response = client.get("/api/tokens/")
    if persona is None:
        assert response.status_code == 403
        return
    names = [t["name"] for t in response.json()]
    assert names == (["owners laptop"] if persona == "owner" else [])
