"""Behind a reverse proxy under a sub-path (https://lab.example.org/gpus/), as nginx passes it.

The requests go to a real daphne with production settings, carrying what the nginx site in
deploy/ sets: the full path, Host, X-Forwarded-Proto.
"""

import http.client
import re
import socket
from base64 import b64encode
from http.cookies import SimpleCookie

import pytest

from .conftest import PUBLIC_HOST, login_form_headers

pytestmark = pytest.mark.django_db(transaction=True)


def via_proxy(site, method, path, body=None, headers=None, https=True):
    """One request as the proxy forwards it; returns (status, headers, text)."""
    conn = http.client.HTTPConnection("127.0.0.1", site.port, timeout=15)
    sent = {"Host": PUBLIC_HOST, "X-Forwarded-For": "192.0.2.7", **(headers or {})}
    if https:
        sent["X-Forwarded-Proto"] = "https"
    conn.request(method, path, body=body, headers=sent)
    response = conn.getresponse()
    text = response.read().decode(errors="replace")
    conn.close()
    return response.status, response.headers, text


def cookies(headers) -> SimpleCookie:
    jar = SimpleCookie()
    for line in headers.get_all("Set-Cookie") or []:
        jar.load(line)
    return jar


def sign_in(site, username, password):
    """Sign in through the login form; returns the response to the POST and its cookies."""
    _, headers, page = via_proxy(site, "GET", "/gpus/accounts/login/")
    csrf = cookies(headers)["csrftoken"].value
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    body = f"username={username}&password={password}&csrfmiddlewaretoken={token}"
    status, headers, _ = via_proxy(
        site,
        "POST",
        "/gpus/accounts/login/",
        body=body,
        headers=login_form_headers(PUBLIC_HOST, "/gpus/accounts/login/", csrf),
    )
    return status, headers


def test_the_login_page_links_carry_the_prefix(proxied_site):
    status, headers, page = via_proxy(proxied_site, "GET", "/gpus/accounts/login/")
    assert status == 200
    assert 'action="/gpus/accounts/login/"' in page
    assert re.search(r'href="/gpus/static/css/hive\.css"', page)
    csrf = cookies(headers)["csrftoken"]
    assert csrf["path"] == "/gpus" and csrf["secure"]


def test_static_files_are_served_under_the_prefix(proxied_site):
    status, headers, text = via_proxy(proxied_site, "GET", "/gpus/static/css/hive.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css") and text


def test_redirects_carry_the_prefix(proxied_site):
    status, headers, _ = via_proxy(proxied_site, "GET", "/gpus/")
    assert status == 302
    assert headers["Location"] == "/gpus/accounts/login/?next=/gpus/"


def test_plain_http_is_sent_to_https_and_https_gets_hsts(proxied_site):
    status, headers, _ = via_proxy(proxied_site, "GET", "/gpus/accounts/login/", https=False)
    assert status == 301
    assert headers["Location"] == f"https://{PUBLIC_HOST}/gpus/accounts/login/"
    _, headers, _ = via_proxy(proxied_site, "GET", "/gpus/accounts/login/")
    assert headers["Strict-Transport-Security"] == ("max-age=31536000; includeSubDomains; preload")


def test_signing_in_lands_under_the_prefix_with_a_secure_session_cookie(proxied_site, owner):
    status, headers = sign_in(proxied_site, "owner", "pw-owner-1")
    assert (status, headers["Location"]) == (302, "/gpus/")
    session = cookies(headers)["sessionid"]
    assert session["path"] == "/gpus" and session["secure"] and session["httponly"]
    cookie = {"Cookie": f"sessionid={session.value}"}
    status, _, page = via_proxy(proxied_site, "GET", "/gpus/", headers=cookie)
    assert status == 200
    assert 'data-ws-path="/gpus/ws/monitoring/live/"' in page
    assert 'data-api-root="/gpus/api/"' in page  # where the pages' scripts call the API
    assert 'href="/gpus/api/docs/"' in page
    # The CLI calls <site>/api/...: the site it is told to log in to carries the prefix.
    _, _, page = via_proxy(proxied_site, "GET", "/gpus/account/tokens/", headers=cookie)
    assert f"hive login https://{PUBLIC_HOST}/gpus/</code>" in page


def test_a_cross_site_post_is_refused(proxied_site, owner):
    _, headers, page = via_proxy(proxied_site, "GET", "/gpus/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    status, _, _ = via_proxy(
        proxied_site,
        "POST",
        "/gpus/accounts/login/",
        body=f"username=owner&password=pw-owner-1&csrfmiddlewaretoken={token}",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"csrftoken={cookies(headers)['csrftoken'].value}",
            "Origin": "https://evil.example.com",
        },
    )
    assert status == 403


def websocket_handshake(site, path, cookie="") -> str:
    """The status line daphne answers a websocket upgrade with."""
    key = b64encode(b"0123456789abcdef").decode()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {PUBLIC_HOST}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: https://{PUBLIC_HOST}\r\nX-Forwarded-Proto: https\r\nCookie: {cookie}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", site.port), timeout=15) as sock:
        sock.sendall(request.encode())
        return sock.recv(4096).decode(errors="replace").split("\r\n", 1)[0]


def test_the_live_websocket_answers_under_the_prefix(proxied_site, owner):
    _, headers = sign_in(proxied_site, "owner", "pw-owner-1")
    session = f"sessionid={cookies(headers)['sessionid'].value}"
    assert " 101 " in websocket_handshake(proxied_site, "/gpus/ws/monitoring/live/", session)
    # Anonymous visitors are refused before the handshake completes.
    assert " 101 " not in websocket_handshake(proxied_site, "/gpus/ws/monitoring/live/")
