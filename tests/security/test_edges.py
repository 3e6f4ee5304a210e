"""Security at the edges (issue 15): the client's address, sign-in and mail limits, other
users' command lines, secrets kept out of caches, the modes of the files the service writes.

The proxy and several-process cases run real daphne and nginx in test_edges_proxy.py.
"""

import os
import stat
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import RequestFactory

from accesscontrol.services import make_host_admin, profile_for
from core.clients import client_address
from monitoring.models import Device, Host

from .conftest import ROOT

LOGIN = "/accounts/login/"
User = get_user_model()


def sign_in(client, username, password, address="10.1.1.1", **headers):
    data = {"username": username, "password": password}
    return client.post(LOGIN, data, REMOTE_ADDR=address, **headers)


def locked(response) -> bool:
    return "Too many failed sign-ins" in response.content.decode()


# --- the client's address ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, None, "203.0.113.9"),
        (0, "1.2.3.4", "203.0.113.9"),  # no proxy: a header anyone can send means nothing
        (1, "198.51.100.7", "198.51.100.7"),  # what nginx wrote
        (1, "1.2.3.4, 198.51.100.7", "198.51.100.7"),  # the client's own entry is not believed
        (2, "1.2.3.4, 198.51.100.7, 10.0.0.2", "198.51.100.7"),
    ],
)
def test_the_client_address_trusts_exactly_the_configured_proxies(
    settings, proxies, forwarded, expected
):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": proxies}
    headers = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}
    request = RequestFactory().get("/", REMOTE_ADDR="203.0.113.9", **headers)
    assert client_address(request) == expected


def test_a_forged_header_does_not_give_another_address(client, owner, settings):
    # Each wrong password with another made-up X-Forwarded-For: without a proxy the header
    # is ignored, so the fifth failure still locks the name from this address.
    settings.LOGIN_ATTEMPTS = 5
    for i in range(12):
        sign_in(client, "owner", "nope", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}")
    assert locked(sign_in(client, "owner", "pw-owner-1", HTTP_X_FORWARDED_FOR="192.0.2.99"))


# --- spraying and the site-wide limit ---------------------------------------------------------


def test_password_spraying_from_one_address_is_stopped(client, db, settings):
    settings.LOGIN_ADDRESS_ATTEMPTS = 10
    names = [f"user{i}" for i in range(40)]
    User.objects.bulk_create([User(username=name) for name in names])
    answers = [sign_in(client, name, "Summer2026!") for name in names]
    assert not any(locked(a) for a in answers[:10])
    assert all(locked(a) for a in answers[10:])
    assert "from your address" in answers[-1].content.decode()
    assert not locked(sign_in(client, "user0", "x", address="10.9.9.9"))  # others are not


def test_spraying_from_many_addresses_brakes_the_site_but_locks_out_no_innocent(
    client, owner, settings
):
    settings.LOGIN_SITE_ATTEMPTS, settings.LOGIN_BRAKE_ADDRESS_ATTEMPTS = 20, 3
    for i in range(20):
        sign_in(client, f"name{i}", "Summer2026!", address=f"10.3.0.{i}")
    # An address with no failures signs in with the right password while the brake holds.
    assert sign_in(client, "owner", "pw-owner-1", address="10.4.0.1").status_code == 302
    client.logout()
    # An attacking address gets a few guesses, not LOGIN_ADDRESS_ATTEMPTS.
    answers = [sign_in(client, f"more{i}", "Winter2026!", address="10.3.0.1") for i in range(3)]
    assert not any(locked(a) for a in answers[:2]) and locked(answers[2])
    assert "on this site" in answers[2].content.decode()
    assert not locked(sign_in(client, "owner", "typo", address="10.4.0.2"))  # one mistake


ADMIN_LOGIN = "/admin/login/?next=/admin/"


def test_refused_attempts_count_nothing_on_any_path(client, owner, settings):
    # authenticate() hears SignInLimit's refusal as a failed sign-in (user_login_failed);
    # whichever form or view calls it, the refused attempt must not count again.
    from django.contrib.auth import authenticate

    settings.LOGIN_ATTEMPTS, settings.LOGIN_ADDRESS_ATTEMPTS = 5, 8
    request = RequestFactory().post(LOGIN, REMOTE_ADDR="10.8.0.1")
    for _ in range(15):  # 5 checked and wrong, then 10 refused
        assert authenticate(request, username="owner", password="nope") is None
    assert not locked(sign_in(client, "other", "x", address="10.8.0.1"))  # 6 of 8, not 16


def test_a_flood_on_the_admin_login_counts_once_and_locks_out_no_one_else(client, owner, settings):
    # Before: every refused attempt counted again, so one address's flood filled the
    # site-wide count (1,100 posts reached 1,000) and then refused everybody everywhere.
    settings.LOGIN_ADDRESS_ATTEMPTS, settings.LOGIN_SITE_ATTEMPTS = 20, 50
    flood = {"username": "admin", "password": "guess"}
    answers = [client.post(ADMIN_LOGIN, flood, REMOTE_ADDR="10.6.6.6") for _ in range(80)]
    assert locked(answers[-1])  # the admin's form says so too
    during = sign_in(client, "owner", "pw-owner-1", address="10.7.0.1")
    assert during.status_code == 302
    client.logout()
    admin_page = client.post(
        ADMIN_LOGIN, {"username": "owner", "password": "x"}, REMOTE_ADDR="10.7.0.2"
    )
    assert not locked(admin_page)  # a wrong password, told as such, from a clean address
    # The flood counted 20 failures, not 80: the site's brake (at 50) is off, so someone who
    # mistypes three times still gets in on the fourth try.
    for _ in range(3):
        sign_in(client, "owner", "typo", address="10.7.0.3")
    assert sign_in(client, "owner", "pw-owner-1", address="10.7.0.3").status_code == 302


def test_the_owner_signing_in_does_not_reset_an_attackers_count(client, owner, settings):
    settings.LOGIN_ADDRESS_ATTEMPTS = 5
    for i in range(4):
        sign_in(client, f"name{i}", "x")
    assert sign_in(client, "owner", "pw-owner-1").status_code == 302  # from the same address
    client.logout()
    sign_in(client, "name9", "x")
    assert locked(sign_in(client, "name10", "x"))


# --- password-reset mails ----------------------------------------------------------------


def reset(client, email, address="10.1.1.1"):
    return client.post("/accounts/password_reset/", {"email": email}, REMOTE_ADDR=address)


def test_reset_mails_to_one_victim_are_limited(client, owner, settings):
    settings.PASSWORD_RESET_MAILS_PER_RECIPIENT = 3
    answers = [reset(client, "owner@example.org", address=f"10.5.0.{i}") for i in range(10)]
    assert {a.status_code for a in answers} == {302}  # the page never tells
    assert len(mail.outbox) == 3 and mail.outbox[0].to == ["owner@example.org"]


def test_reset_requests_from_one_address_are_limited(client, owner, other_user, settings):
    settings.PASSWORD_RESET_MAILS_PER_ADDRESS = 2
    for email in ["owner@example.org", "other@example.org", "owner@example.org"]:
        assert reset(client, email).status_code == 302
    assert [m.to for m in mail.outbox] == [["owner@example.org"], ["other@example.org"]]


# --- other users' command lines ----------------------------------------------------------------

SECRET = "python train.py --api-key=sk-live-0123456789"


@pytest.fixture
def lab(owner, other_user, admin_user):
    """node-1 runs a job of owner's (UNIX alice) and one of other's (UNIX bob); node-2 one of
    bob's. A host admin of node-1 only."""
    for user, name in ((owner, "alice"), (other_user, "bob")):
        profile = profile_for(user)
        profile.unix_username = name
        profile.save()
    hosts = [Host.objects.create(name=f"node-{i}", address=f"10.0.0.{i}") for i in (1, 2)]
    for host, processes in zip(hosts, [[("alice", 11), ("bob", 12)], [("bob", 21)]], strict=True):
        Device.objects.create(host=host, index=0, uuid=f"{host.name}-GPU-0")
        host.status = Host.Status.UP
        host.last_snapshot = {
            "gpus": [],
            "processes": [
                {
                    "gpu_uuid": f"{host.name}-GPU-0",
                    "pid": pid,
                    "user": user,
                    "command": f"{SECRET} --as {user}",
                    "memory_mib": 100,
                }
                for user, pid in processes
            ],
        }
        host.save()
    admin = User.objects.create_user("node1-admin", password="pw-na-1")
    make_host_admin(admin, hosts[0])
    return {"owner": owner, "other_user": other_user, "admin_user": admin_user, "host_admin": admin}


@pytest.mark.parametrize(
    ("persona", "commands_seen"),
    [
        ("owner", {11}),  # only alice's own
        ("other_user", {12, 21}),  # only bob's own, on both hosts
        ("host_admin", {11, 12}),  # everyone's on node-1, nobody's elsewhere
        ("admin_user", {11, 12, 21}),
    ],
)
def test_command_lines_are_shown_only_to_their_owner_and_the_hosts_admins(
    client, lab, persona, commands_seen
):
    client.force_login(lab[persona])
    rows = client.get("/api/processes/").json()
    assert {row["pid"] for row in rows} == {11, 12, 21}  # who, PID and memory: for everyone
    shown = {row["pid"] for row in rows if row["command"] != "command hidden"}
    assert shown == commands_seen
    assert all("sk-live" not in row["command"] for row in rows if row["pid"] not in shown)
    pages = "".join(client.get(f"/hosts/node-{i}/").content.decode() for i in (1, 2))
    assert pages.count("sk-live-0123456789") == len(commands_seen)


def test_anonymous_visitors_get_no_processes(client, lab):
    assert client.get("/api/processes/").status_code == 403
    assert "sk-live" not in client.get("/hosts/node-1/").content.decode()


# --- secrets stay out of caches ------------------------------------------------------------


def test_a_new_tokens_secret_is_never_cached(client, owner):
    response = client.post(
        "/api/tokens/login/",
        {"username": "owner", "password": "pw-owner-1", "name": "cli"},
        content_type="application/json",
    )
    assert response.status_code == 201 and "no-store" in response["Cache-Control"]
    client.force_login(owner)
    page = client.post("/account/tokens/", {"name": "laptop"})
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    api = client.post("/api/tokens/", {"name": "ci"}, content_type="application/json")
    assert api.status_code == 201 and "no-store" in api["Cache-Control"]


# --- the files the service writes ------------------------------------------------------------


def mode(path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def test_a_fresh_data_dir_is_the_services_alone(tmp_path):
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(HIVE_DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="hiveproject.settings")
    manage = [sys.executable, str(ROOT / "manage.py")]
    for command in (["migrate", "-v0"], ["sshkey"]):
        subprocess.run([*manage, *command], env=env, cwd=ROOT, check=True, capture_output=True)
    assert mode(data) == "0o700"
    for name in ("hive.sqlite3", "secret_key", "ssh/id_ed25519"):
        assert mode(data / name) == "0o600", name
    for extra in ("hive.sqlite3-wal", "hive.sqlite3-shm"):
        if (data / extra).exists():
            assert mode(data / extra) == "0o600", extra


def test_sign_in_still_works_when_the_shared_cache_is_gone(client, owner, settings, caplog):
    # Redis down (here: a Redis cache on a port where nothing listens): the limits are
    # skipped and the failure logged; pages keep serving, as the fault tests expect.
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    assert sign_in(client, "owner", "nope").status_code == 200
    assert sign_in(client, "owner", "pw-owner-1").status_code == 302
    assert "the shared cache failed" in caplog.text


def test_api_throttles_ignore_a_forged_forwarded_for(client, owner, monkeypatch):
    # DRF keyed its throttles on the raw header while NUM_PROXIES was unset: each request
    # with another made-up address got a fresh allowance.
    from rest_framework.throttling import ScopedRateThrottle

    from apitokens.services import issue_token

    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"tokens": "3/minute"})
    _, secret = issue_token(owner, "cli")
    codes = [
        client.get(
            "/api/tokens/",
            HTTP_AUTHORIZATION=f"Bearer {secret}",
            HTTP_X_FORWARDED_FOR=f"192.0.2.{i}",
        ).status_code
        for i in range(4)
    ]
    assert codes == [200, 200, 200, 429]
