"""The client's address behind the committed nginx site and the shipped daphne command
line, and sign-in counts shared by several web processes (issue 15).

nginx runs deploy/nginx/gpuhive.conf as committed (see test_nginx.py for what is
substituted); daphne runs with the options of deploy/systemd/gpuhive-web@.service. Clients
connect from different loopback addresses (127.0.0.1, 127.0.0.3), so nginx sees two
clients, as it would two people.
"""

import http.client
import re
import shlex
import subprocess
import sys
import uuid

import pytest

from tests.realparts import require

from .conftest import ROOT, Daphne, behind_proxy_env, login_form_headers, service_env
from .test_nginx import NGINX, nginx_site, upstream_file
from .test_sub_path import cookies

pytestmark = pytest.mark.django_db(transaction=True)

UNIT = ROOT / "deploy" / "systemd" / "gpuhive-web@.service"
HOST = "gpus.lab.example.org"
ATTEMPTS = "3"  # LOGIN_ATTEMPTS of the servers under test


def shipped_daphne_options() -> list[str]:
    """daphne's options in the unit's ExecStart (between `-m MODULE` and the application)."""
    text = UNIT.read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart="))
    return argv[argv.index("-m") + 2 : -1]


@pytest.fixture(scope="module")
def site(django_db_setup, django_db_blocker, tmp_path_factory):
    """The shipped daphne behind nginx with the committed site, production profile."""
    require(NGINX is not None, "nginx is not installed (Debian: apt-get install nginx-light)")
    workdir = tmp_path_factory.mktemp("edges")
    data_dir = workdir / "data"
    env = {**behind_proxy_env(data_dir, f"https://{HOST}", HOST), "LOGIN_ATTEMPTS": ATTEMPTS}
    with django_db_blocker.unblock():
        daphne = Daphne(env, options=shipped_daphne_options())
    try:
        nginx, site = nginx_site(workdir, "root", upstream_file(workdir, daphne.port, 1), data_dir)
        try:
            yield site
        finally:
            nginx.stop()
    finally:
        daphne.stop()


def request(site, method, path, source, body=None, headers=None):
    """One request to nginx from the loopback address ``source``."""
    conn = http.client.HTTPSConnection(
        "127.0.0.1",
        site.https_port,
        timeout=30,
        context=site.tls_context(),
        source_address=(source, 0),
    )
    try:
        conn.request(method, path, body=body, headers={"Host": site.host, **(headers or {})})
        response = conn.getresponse()
        return response.status, response.headers, response.read().decode()
    finally:
        conn.close()


def sign_in(site, username, password, source="127.0.0.1", forged=None):
    """The login form from ``source``; ``forged``: an X-Forwarded-For the client adds."""
    extra = {"X-Forwarded-For": forged} if forged else {}
    _, headers, page = request(site, "GET", "/accounts/login/", source, headers=extra)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
    form_headers = login_form_headers(HOST, "/accounts/login/", cookies(headers)["csrftoken"].value)
    body = f"username={username}&password={password}&csrfmiddlewaretoken={token}"
    status, _, page = request(
        site, "POST", "/accounts/login/", source, body=body, headers={**form_headers, **extra}
    )
    return status, page


def locked(page: str) -> bool:
    return "Too many failed sign-ins" in page


def test_the_shipped_daphne_does_not_believe_client_headers():
    assert "--proxy-headers" not in shipped_daphne_options()
    assert "-b" in shipped_daphne_options() and "127.0.0.1" in shipped_daphne_options()


def test_a_forged_forwarded_for_changes_nothing(site):
    name = f"victim-{uuid.uuid4().hex[:8]}"
    for i in range(int(ATTEMPTS)):
        status, page = sign_in(site, name, "nope", forged=f"192.0.2.{i}")
        assert status == 200 and not locked(page)
    # Each try claimed another address; nginx overwrote the header with the real one.
    status, page = sign_in(site, name, "nope", forged="192.0.2.200")
    assert locked(page)


def test_a_stranger_cannot_lock_the_owner_out(site, owner):
    for _ in range(int(ATTEMPTS) + 2):
        sign_in(site, "owner", "guess", source="127.0.0.3")
    assert locked(sign_in(site, "owner", "pw-owner-1", source="127.0.0.3")[1])
    status, _ = sign_in(site, "owner", "pw-owner-1", source="127.0.0.1")
    assert status == 302  # the owner, from their own address, is not locked out


# --- two web processes ------------------------------------------------------------------------


@pytest.fixture
def two_web_processes(django_db_blocker, tmp_path):
    """Two daphnes on the test database with the shared cache (the database's on SQLite,
    Redis when REDIS_URL is set), as two web processes of one installation."""
    env = {**service_env(tmp_path / "data"), "HIVE_SHARED_CACHE": "1", "LOGIN_ATTEMPTS": ATTEMPTS}
    manage = [sys.executable, str(ROOT / "manage.py")]
    with django_db_blocker.unblock():
        subprocess.run([*manage, "createcachetable"], env=env, cwd=ROOT, check=True)
        servers = [Daphne(env, collect_static=i == 0) for i in range(2)]
    yield servers
    for server in servers:
        server.stop()


def direct_sign_in(server, username, password):
    """The login form straight at one daphne (no proxy: the socket's address counts)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", "/accounts/login/", headers={"Host": "localhost"})
        response = conn.getresponse()
        page, headers = response.read().decode(), response.headers
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
        conn.request(
            "POST",
            "/accounts/login/",
            body=f"username={username}&password={password}&csrfmiddlewaretoken={token}",
            headers={
                "Host": "localhost",
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": f"csrftoken={cookies(headers)['csrftoken'].value}",
            },
        )
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_failed_sign_ins_count_across_web_processes(two_web_processes, owner):
    first, second = two_web_processes
    direct_sign_in(first, "owner", "nope")
    direct_sign_in(second, "owner", "nope")
    direct_sign_in(first, "owner", "nope")
    # Three failures in all, spread over both: both processes know the name is locked.
    for server in two_web_processes:
        status, page = direct_sign_in(server, "owner", "pw-owner-1")
        assert status == 200 and locked(page)
