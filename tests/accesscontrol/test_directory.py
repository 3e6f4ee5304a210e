"""Sign in with the lab's directory: a real OpenLDAP slapd on loopback (tests/directoryparts),
configured through the HIVE_LDAP_* variables as an admin would (read by settings.py itself).

The directory's people sign in on the sign-in page and through the API's token login, land
in the directory's groups (the local group "everyone" kept), and get the directory's UNIX
name as their account on every host; root and system accounts never become one."""

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured, ValidationError

from accesscontrol.accounts import check_run_as
from accesscontrol.models import HostAccount
from accesscontrol.services import ensure_default_group, profile_for
from monitoring.models import Host
from tests.directoryparts import (  # noqa: F401  (fixtures)
    DIRECTORY_PEOPLE,
    PEOPLE,
    Slapd,
    configure,
    directory_env,
    lab_directory,
    require_ldap_libraries,
)
from tests.realparts import free_port

ROOT = Path(__file__).resolve().parents[2]

User = get_user_model()
LOGIN = "/accounts/login/"
TOKEN_LOGIN = "/api/tokens/login/"


def password(uid: str) -> str:
    return DIRECTORY_PEOPLE[uid][1]


@pytest.fixture
def directory(db, lab_directory, monkeypatch, settings, tmp_path):  # noqa: F811
    """The lab's directory configured (search with a service bind DN, posixGroup groups)."""
    ensure_default_group()
    configure(monkeypatch, settings, **directory_env(lab_directory, tmp_path))
    return lab_directory


@pytest.fixture
def hosts(db):
    return [
        Host.objects.create(name=name, address=f"10.0.0.{i}", username="monitor")
        for i, name in enumerate(("node-1", "node-2"), start=1)
    ]


def sign_in(client, username: str, secret: str):
    return client.post(LOGIN, {"username": username, "password": secret})


def test_the_sign_in_page_says_the_directory_is_a_way_in(client, directory):
    page = client.get(LOGIN).content.decode()
    assert "Your lab account (the lab's directory) or an account of this site." in page
    assert "Sign in with" not in page  # no OIDC provider configured


def test_a_directory_user_signs_in_lands_in_its_groups_and_runs_as_its_unix_name(
    client, directory, hosts
):
    ada_before = User.objects.create_user("ada")  # known here before, in a group of ours
    ada_before.groups.add(Group.objects.create(name="vision"))
    response = sign_in(client, "ada", password("ada"))
    assert response.status_code == 302 and response["Location"] == "/"
    ada = User.objects.get(username="ada")
    assert ada.pk == ada_before.pk and int(client.session["_auth_user_id"]) == ada.pk
    assert (ada.first_name, ada.last_name, ada.email) == ("Ada", "Lab", "ada@lab.test")
    assert not ada.has_usable_password()  # the directory checks it, never our database
    # The directory's groups, and the local group everyone kept.
    assert set(ada.groups.values_list("name", flat=True)) == {"ml-lab", "everyone"}
    assert profile_for(ada).unix_username == "ada"
    assert [check_run_as(ada, host).name for host in hosts] == ["ada", "ada"]


def test_a_per_host_account_still_wins_on_its_host(client, directory, hosts):
    sign_in(client, "linus", password("linus"))
    linus = User.objects.get(username="linus")
    HostAccount.objects.create(profile=profile_for(linus), host=hosts[1], unix_username="ltorvalds")
    assert [check_run_as(linus, host).name for host in hosts] == ["linus", "ltorvalds"]
    assert set(linus.groups.values_list("name", flat=True)) == {"vision", "everyone"}


@pytest.mark.parametrize(
    ("uid", "why"),
    [("root", "root is never used to run jobs"), ("daemonish", "has UID 500, a system account")],
)
def test_a_directory_entry_for_root_or_a_system_account_never_becomes_a_run_as_account(
    client, directory, hosts, uid, why, caplog
):
    before = User.objects.create_user(uid)
    profile = profile_for(before)
    profile.unix_username = "someone-else"  # whatever it was, the directory says otherwise now
    profile.save()
    assert sign_in(client, uid, password(uid)).status_code == 302
    user = User.objects.get(username=uid)
    assert profile_for(user).unix_username == ""
    assert why in caplog.text
    with pytest.raises(ValidationError, match="has no UNIX account name"):
        check_run_as(user, hosts[0])


def test_nobody_signs_in_as_the_stand_in_for_anonymous_visitors(client, directory):
    response = sign_in(client, "AnonymousUser", password("AnonymousUser"))
    assert response.status_code == 200 and "_auth_user_id" not in client.session


def test_the_api_token_login_takes_the_directory_password(client, directory):
    answer = client.post(
        TOKEN_LOGIN, {"username": "ada", "password": password("ada"), "name": "cli"}
    )
    assert answer.status_code == 201, answer.content
    mine = client.get("/api/tokens/", headers={"Authorization": f"Bearer {answer.json()['token']}"})
    assert mine.status_code == 200 and mine.json()[0]["user"] == "ada"


def test_a_wrong_password_fails(client, directory):
    response = sign_in(client, "ada", "not-the-password")
    assert response.status_code == 200
    assert "Your user name and password didn't match." in response.content.decode()
    assert "_auth_user_id" not in client.session
    answer = client.post(TOKEN_LOGIN, {"username": "ada", "password": "nope", "name": "cli"})
    assert answer.status_code in (401, 403)
    assert answer.json()["detail"] == "Wrong user name or password."


def test_a_directory_that_is_down_says_so_and_local_accounts_still_sign_in(
    client, db, monkeypatch, settings, tmp_path
):
    require_ldap_libraries()
    ensure_default_group()
    nothing = Slapd.__new__(Slapd)
    nothing.uri = f"ldap://127.0.0.1:{free_port()}"  # nobody listens there
    configure(monkeypatch, settings, **directory_env(nothing, tmp_path))
    response = sign_in(client, "ada", password("ada"))
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert "The lab's directory could not be reached, so only local accounts can sign in" in page
    answer = client.post(TOKEN_LOGIN, {"username": "ada", "password": password("ada"), "name": "x"})
    assert answer.status_code == 400
    assert "could not be reached" in answer.json()["detail"]

    User.objects.create_user("localbob", password="pw-local-bob-1")
    assert sign_in(client, "localbob", "pw-local-bob-1").status_code == 302


def test_a_service_bind_the_directory_refuses_says_so(
    client,
    db,
    lab_directory,  # noqa: F811 (the fixture, imported)
    monkeypatch,
    settings,
    tmp_path,
):
    env = directory_env(lab_directory, tmp_path)
    (tmp_path / "ldap-bind-password").write_text("wrong-secret\n")
    configure(monkeypatch, settings, **env)
    page = html.unescape(sign_in(client, "ada", password("ada")).content.decode())
    assert "The lab's directory answered with an error (Invalid credentials)" in page


def test_direct_bind_with_a_dn_template_and_a_required_group(
    client,
    db,
    lab_directory,  # noqa: F811 (the fixture, imported)
    monkeypatch,
    settings,
):
    configure(
        monkeypatch,
        settings,
        HIVE_LDAP_SERVER_URI=lab_directory.uri,
        HIVE_LDAP_USER_DN_TEMPLATE=f"uid=%(user)s,{PEOPLE}",
        HIVE_LDAP_GROUP_SEARCH_BASE=f"ou=groups,{Slapd.SUFFIX}",
        HIVE_LDAP_REQUIRE_GROUP=f"cn=ml-lab,ou=groups,{Slapd.SUFFIX}",
    )
    assert sign_in(client, "linus", password("linus")).status_code == 200  # not in ml-lab
    assert sign_in(client, "ada", password("ada")).status_code == 302
    assert profile_for(User.objects.get(username="ada")).unix_username == "ada"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "set HIVE_LDAP_USER_SEARCH_BASE (search) or HIVE_LDAP_USER_DN_TEMPLATE"),
        (
            {"HIVE_LDAP_USER_SEARCH_BASE": PEOPLE, "HIVE_LDAP_GROUP_TYPE": "posix"},
            "one of posixGroup",
        ),
        (
            {"HIVE_LDAP_USER_SEARCH_BASE": PEOPLE, "HIVE_LDAP_TLS_REQUIRE_CERT": "maybe"},
            "HIVE_LDAP_TLS_REQUIRE_CERT='maybe' (from the environment): expected one of demand",
        ),
    ],
)
def test_a_directory_configured_wrong_is_refused_at_start(monkeypatch, settings, env, message):
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        configure(monkeypatch, settings, HIVE_LDAP_SERVER_URI="ldap://127.0.0.1:1", **env)


def test_without_a_directory_uri_nothing_changes(monkeypatch, settings):
    configure(monkeypatch, settings)
    assert "accesscontrol.directory.DirectoryBackend" not in settings.AUTHENTICATION_BACKENDS
    assert not hasattr(settings, "AUTH_LDAP_SERVER_URI")


def test_a_directory_turned_on_without_its_libraries_stops_the_start_saying_what_to_install(
    tmp_path,
):
    """python-ldap is not in the runtime's lock (it builds from source): a site that sets
    HIVE_LDAP_SERVER_URI without installing requirements-directory.txt is told so at start,
    in one line, not with a traceback. Here the import of python-ldap is made to fail."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("HIVE_")}
    env.update(
        DJANGO_SETTINGS_MODULE="hiveproject.settings",
        HIVE_DATA_DIR=str(tmp_path),
        HIVE_LDAP_SERVER_URI="ldaps://ldap.lab.example.org",
        HIVE_LDAP_USER_SEARCH_BASE=PEOPLE,
    )
    without_ldap = (
        "import runpy, sys; sys.modules['ldap'] = None; sys.argv = ['manage.py', 'check']; "
        "runpy.run_path('manage.py', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", without_ldap],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("The service cannot start")
    assert (
        "HIVE_LDAP_SERVER_URI is set, but the directory's libraries are not installed "
        "(no module ldap): install requirements-directory.txt" in done.stderr
    )
