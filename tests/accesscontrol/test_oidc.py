"""Sign in with the lab's OpenID Connect provider: a real one (django-oidc-provider, a Django
project of its own in tests/oidcprovider) on loopback, configured through HIVE_OIDC_* as an
admin would. The code flow goes through for real: our /oidc/authenticate/ sends the browser
to the provider, the person signs in there, the provider sends the browser back with a code,
and our callback trades it for tokens (PKCE), checks the ID token's signature with the
provider's keys and reads the claims from its userinfo endpoint."""

import html
from io import StringIO
from urllib.parse import urljoin

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import call_command

from accesscontrol.accounts import check_run_as
from accesscontrol.services import ensure_default_group, profile_for
from monitoring.models import Host
from tests.directoryparts import OidcProvider, configure
from tests.realparts import free_port

User = get_user_model()
SITE = "http://testserver"
PEOPLE = {
    "grace": {
        "password": "pw-grace-provider",
        "claims": {
            "preferred_username": "grace",
            "email": "grace@lab.test",
            "given_name": "Grace",
            "family_name": "Hopper",
            "unix_name": "ghopper",
            "groups": ["vision", "cluster-admins"],
        },
    },
    "mallory": {
        "password": "pw-mallory-provider",
        "claims": {"preferred_username": "mallory", "email": "m@lab.test", "unix_name": "root"},
    },
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    server = OidcProvider(tmp_path_factory.mktemp("oidc"), f"{SITE}/oidc/callback/", PEOPLE)
    server.start()
    yield server
    server.stop()


def provider_env(provider: OidcProvider, **more: str) -> dict[str, str]:
    return {
        "HIVE_OIDC_CLIENT_ID": provider.CLIENT_ID,
        "HIVE_OIDC_CLIENT_SECRET": provider.CLIENT_SECRET,
        "HIVE_OIDC_PROVIDER_NAME": "Lab SSO",
        "HIVE_OIDC_AUTHORIZATION_ENDPOINT": provider.endpoint("authorize"),
        "HIVE_OIDC_TOKEN_ENDPOINT": provider.endpoint("token"),
        "HIVE_OIDC_USERINFO_ENDPOINT": provider.endpoint("userinfo"),
        "HIVE_OIDC_JWKS_ENDPOINT": provider.endpoint("jwks"),
        "HIVE_OIDC_SCOPES": "openid email profile lab",
        "HIVE_OIDC_UNIX_NAME_CLAIM": "unix_name",
        "HIVE_OIDC_GROUPS_CLAIM": "groups",
        **more,
    }


@pytest.fixture
def configured(db, provider, monkeypatch, settings):
    ensure_default_group()
    configure(monkeypatch, settings, **provider_env(provider))
    return provider


def sign_in_with_provider(client, username: str, next_page: str = "/jobs/"):
    """As a browser: our sign-in start, the provider's own sign-in form, back with a code.
    Returns our callback's answer."""
    start = client.get(f"/oidc/authenticate/?next={next_page}")
    assert start.status_code == 302, start.content
    browser, url = requests.Session(), start["Location"]
    while not url.startswith(SITE):
        answer = browser.get(url, allow_redirects=False, timeout=10)
        if answer.status_code == 200 and 'name="password"' in answer.text:  # who are you?
            form = {
                "username": username,
                "password": PEOPLE[username]["password"],
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            }
            answer = browser.post(answer.url, data=form, allow_redirects=False, timeout=10)
        assert answer.status_code == 302, answer.text
        url = urljoin(answer.url, answer.headers["Location"])
    return client.get(url.removeprefix(SITE))


def test_the_sign_in_page_offers_the_provider(client, configured):
    page = client.get("/accounts/login/?next=/jobs/").content.decode()
    assert 'href="/oidc/authenticate/?next=/jobs/">Sign in with Lab SSO</a>' in page
    assert "Or with a user name and password" in page


def test_a_person_signs_in_with_the_provider_and_gets_its_unix_name_and_groups(client, configured):
    answer = sign_in_with_provider(client, "grace")
    assert answer.status_code == 302 and answer["Location"] == "/jobs/"
    grace = User.objects.get(username="grace")
    assert int(client.session["_auth_user_id"]) == grace.pk
    assert (grace.first_name, grace.last_name, grace.email) == (
        "Grace",
        "Hopper",
        "grace@lab.test",
    )
    assert not grace.has_usable_password()
    groups = set(grace.groups.values_list("name", flat=True))
    assert groups == {"vision", "cluster-admins", "everyone"}  # everyone: a local group, kept
    assert profile_for(grace).unix_username == "ghopper"
    host = Host.objects.create(name="node-1", address="10.0.0.1", username="monitor")
    assert check_run_as(grace, host).name == "ghopper"


def test_a_provider_that_names_root_gives_no_run_as_account(client, configured, caplog):
    assert sign_in_with_provider(client, "mallory")["Location"] == "/jobs/"
    mallory = User.objects.get(username="mallory")
    assert profile_for(mallory).unix_username == ""
    assert "root is never used to run jobs" in caplog.text
    host = Host.objects.create(name="node-1", address="10.0.0.1", username="monitor")
    with pytest.raises(ValidationError, match="has no UNIX account name"):
        check_run_as(mallory, host)


def test_a_provider_that_cannot_be_asked_sends_back_to_the_sign_in_page_saying_so(
    client, db, provider, monkeypatch, settings
):
    dead = f"http://127.0.0.1:{free_port()}/token"  # nobody listens there
    configure(monkeypatch, settings, **provider_env(provider, HIVE_OIDC_TOKEN_ENDPOINT=dead))
    answer = sign_in_with_provider(client, "grace")
    assert answer.status_code == 302 and answer["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in client.session
    page = html.unescape(client.get("/accounts/login/").content.decode())
    assert "Signing in with Lab SSO did not work: the provider could not be asked." in page


def test_a_provider_that_refuses_our_client_says_so(client, db, provider, monkeypatch, settings):
    env = provider_env(provider, HIVE_OIDC_CLIENT_SECRET="not-the-secret")
    configure(monkeypatch, settings, **env)
    assert sign_in_with_provider(client, "grace")["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in client.session
    page = html.unescape(client.get("/accounts/login/").content.decode())
    assert "Signing in with Lab SSO did not work: the provider refused it (HTTP 400)." in page


def test_without_a_provider_its_pages_are_not_there(client, db, monkeypatch, settings):
    configure(monkeypatch, settings)
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert "Sign in with" not in client.get("/accounts/login/").content.decode()


def test_oidc_discover_prints_the_endpoints_from_the_discovery_document(provider):
    out = StringIO()
    call_command("oidc_discover", f"{provider.url}/openid", stdout=out)
    assert out.getvalue().splitlines() == [
        f"HIVE_OIDC_AUTHORIZATION_ENDPOINT={provider.endpoint('authorize')}",
        f"HIVE_OIDC_TOKEN_ENDPOINT={provider.endpoint('token')}",
        f"HIVE_OIDC_USERINFO_ENDPOINT={provider.endpoint('userinfo')}",
        f"HIVE_OIDC_JWKS_ENDPOINT={provider.endpoint('jwks')}",
    ]
