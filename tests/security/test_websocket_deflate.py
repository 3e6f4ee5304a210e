"""The web server compresses websockets (permessage-deflate) for clients that offer it, as
browsers do (core.webserver): the live board's JSON is about a quarter of its size on the
wire. A client that offers nothing gets plain frames."""

import re
import socket
from base64 import b64encode

import httpx
import pytest

from tests.realparts import free_port

from .conftest import Daphne, service_env
from .test_bounded_requests import webserver_command

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    env = service_env(tmp_path_factory.mktemp("deflate"))
    port = free_port()
    with django_db_blocker.unblock():
        daphne = Daphne(env, collect_static=False, port=port, command=webserver_command(port))
    yield daphne
    daphne.stop()


def handshake(port: int, cookie: str, *fields: str) -> str:
    """The head daphne answers a websocket upgrade of the live board with."""
    key = b64encode(b"0123456789abcdef").decode()
    request = "\r\n".join(
        [
            "GET /ws/monitoring/live/?view=board HTTP/1.1",
            "Host: localhost",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            "Origin: http://localhost",
            f"Cookie: {cookie}",
            *fields,
            "",
            "",
        ]
    )
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
        return head.split(b"\r\n\r\n", 1)[0].decode().lower()


def signed_in_cookie(port: int) -> str:
    """A session of the server's own (its secret key is its own), through the login form."""
    with httpx.Client(base_url=f"http://localhost:{port}") as web:
        page = web.get("/accounts/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
        form = {"username": "owner", "password": "pw-owner-1", "csrfmiddlewaretoken": token}
        answer = web.post("/accounts/login/", data=form, headers={"Referer": str(web.base_url)})
        assert answer.status_code == 302, answer.text[:300]
        return f"sessionid={web.cookies['sessionid']}"


def test_an_offer_of_permessage_deflate_is_accepted(server, owner):
    cookie = signed_in_cookie(server.port)
    offered = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"
    head = handshake(server.port, cookie, offered)
    assert " 101 " in head.split("\r\n")[0]
    assert "sec-websocket-extensions: permessage-deflate" in head
    plain = handshake(server.port, cookie)
    assert " 101 " in plain.split("\r\n")[0] and "sec-websocket-extensions" not in plain
