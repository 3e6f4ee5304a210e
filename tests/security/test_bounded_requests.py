"""Bounded bodies and heads at the web server itself (issue 37): what reaches daphne directly,
as with `serve --bind 0.0.0.0`, is refused as it arrives, in words, as nginx would refuse it.

Before, daphne (Twisted) took in a whole body before anything could answer: a 1 GB POST got
its 413 after 7 s with daphne at 1.2 GB, a chunked body was answered only once it ended, and
a 100 KB header closed the connection without an answer.
"""

import json
import select
import socket
import sys
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from apitokens.services import issue_token
from tests.faults.supervised import Service, is_daphne, service, until
from tests.realparts import children, free_port

from .conftest import Daphne, service_env

pytestmark = pytest.mark.django_db(transaction=True)

GIB = 1024**3
MIB = 1024**2
READ_TIMEOUT = "3"  # REQUEST_READ_TIMEOUT of the servers under test, in seconds
SENT = 32 * MIB  # what a test sends of a body that is too large: far below a GiB


def webserver_command(port: int) -> list[str]:
    """The server as the systemd unit and `serve` run it."""
    return [
        *(sys.executable, "-m", "core.webserver", "-b", "127.0.0.1", "-p", str(port)),
        "hiveproject.asgi:application",
    ]


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    env = service_env(tmp_path_factory.mktemp("bounded"), REQUEST_READ_TIMEOUT=READ_TIMEOUT)
    port = free_port()
    with django_db_blocker.unblock():
        daphne = Daphne(env, collect_static=False, port=port, command=webserver_command(port))
    yield daphne
    daphne.stop()


def rss(pid: int) -> int:
    """Resident memory of a process, in bytes, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def head(method: str, path: str, *fields: str) -> bytes:
    return "\r\n".join([f"{method} {path} HTTP/1.1", "Host: localhost", *fields, "", ""]).encode()


def pieces(total: int, size: int = 64 * 1024):
    for _ in range(total // size):
        yield b" " * size


def chunked(body):
    """The pieces in chunked transfer coding, never ending (no last chunk)."""
    for piece in body:
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"


def one_big_chunk(body):
    """The pieces as the start of a single chunk of a GiB."""
    yield f"{GIB:x}\r\n".encode()
    yield from body


def exchange(port: int, request: bytes, body=(), *, stop_at_answer: bool = False) -> bytes:
    """Send a request and its body's pieces, then read the answer to its end. A server that
    answers early may stop reading: a failing send ends the body. Nothing here waits for an
    answer the server did not give within the socket's timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(request)
        for piece in body:
            if stop_at_answer and select.select([sock], [], [], 0)[0]:
                break
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
        return read_to_end(sock)


def read_to_end(sock: socket.socket) -> bytes:
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass  # after the answer, if the client sent on past the server's lingering
    return received


def refusal(answer: bytes, status: int) -> str:
    """The detail of a refusal with ``status`` in the API's error shape."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), answer[:300]
    assert b"content-type: application/json" in head.lower(), head
    return json.loads(body)["detail"]


# --- bodies ------------------------------------------------------------------------------


def test_a_declared_gigabyte_is_refused_before_it_is_read(server):
    before = rss(server.proc.pid)
    request = head("POST", "/api/reservations/", f"Content-Length: {GIB}", "Content-Type: x")
    answer = exchange(server.port, request, pieces(SENT))
    grown = rss(server.proc.pid) - before
    assert "body is too large" in refusal(answer, 413)
    assert grown < SENT // 2, f"daphne grew by {grown // MIB} MiB while {SENT // MIB} MiB came"


@pytest.mark.parametrize("coding", [chunked, one_big_chunk])
def test_a_chunked_body_is_cut_off_as_soon_as_it_passes_the_cap(server, coding):
    before = rss(server.proc.pid)
    request = head("POST", "/api/reservations/", "Transfer-Encoding: chunked")
    # Never ends: only a server that counts as the body arrives can answer at all.
    answer = exchange(server.port, request, coding(pieces(SENT)), stop_at_answer=True)
    grown = rss(server.proc.pid) - before
    assert "body is too large" in refusal(answer, 413)
    assert grown < SENT // 2, f"daphne grew by {grown // MIB} MiB"


@pytest.fixture
def token(owner):
    return issue_token(owner, "bounded")[1]


@pytest.mark.parametrize("coding", ["length", "chunked"])
def test_a_body_under_the_cap_still_reaches_the_view(server, token, coding):
    padding = "x" * (settings.REQUEST_MAX_BODY_BYTES - 1000)
    body = json.dumps({"title": "big", "note": padding}).encode()
    content = body if coding == "length" else iter([body[: len(body) // 2], body[len(body) // 2 :]])
    response = httpx.post(
        f"http://127.0.0.1:{server.port}/api/reservations/",
        content=content,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=30,
    )
    # The view parsed the whole JSON (a cut one would be a parse error) and asks for the rest.
    assert response.status_code == 400, response.text
    assert "devices" in response.json(), response.text


def test_a_multipart_body_twisted_cannot_parse_gets_the_error_shape(server, token):
    """Twisted parsed form bodies itself and answered one it could not parse with a bare 400
    (no headers, no body) before Django saw it; the bounded server's requests leave form
    bodies to Django."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "multipart/form-data; boundary=xyz",
    }
    url = f"http://127.0.0.1:{server.port}/api/tasks/bulk/"
    response = httpx.post(url, content=b"--xyz--\r\n", headers=headers, timeout=30)
    assert response.status_code == 400
    assert response.json()["action"] == ["This field is required."]


# --- heads -------------------------------------------------------------------------------


def test_a_100_kb_header_gets_431_not_a_closed_connection(server):
    request = head("GET", "/api/devices/", f"Authorization: Bearer {'a' * 100_000}")
    assert "header is longer than 8192 bytes" in refusal(exchange(server.port, request), 431)


def test_too_many_headers_get_431(server):
    fields = [f"X-Field-{i}: {i}" for i in range(settings.REQUEST_MAX_HEADERS + 1)]
    answer = exchange(server.port, head("GET", "/api/devices/", *fields))
    assert f"more than {settings.REQUEST_MAX_HEADERS} headers" in refusal(answer, 431)


def test_a_large_head_of_small_headers_gets_431(server):
    fields = [f"X-Field-{i}: {'v' * 4000}" for i in range(10)]  # 40 KB, no line over 8 KiB
    answer = exchange(server.port, head("GET", "/api/devices/", *fields))
    assert "head is larger than" in refusal(answer, 431)


def test_a_long_request_line_gets_414(server):
    answer = exchange(server.port, head("GET", "/api/devices/?q=" + "a" * 20_000))
    assert "request line is longer" in refusal(answer, 414)


def test_a_head_sent_byte_by_byte_gets_408(server):
    """A slow client (slowloris) keeps a connection only for the head's time."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
        sock.sendall(b"GET /api/devices/ HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        for _ in range(60):  # 30 s of trickle at most, ten times the server's bound
            if select.select([sock], [], [], 0.5)[0]:
                break
            sock.sendall(b"a")
        assert "did not arrive within" in refusal(read_to_end(sock), 408)


def test_an_ordinary_request_and_keep_alive_still_work(server, token):
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=15) as client:
        for _ in range(2):  # the second on the same connection
            response = client.get("/api/devices/", headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 200, response.text


# --- serve ---------------------------------------------------------------------------------


@pytest.fixture
def serve(tmp_path):
    port = free_port()
    env = service(tmp_path / "data", tmp_path / "gpus")
    server = Service(["serve", "--bind", "127.0.0.1", "--port", str(port)], env, tmp_path / "log")
    server.port = port
    yield server
    server.kill_all()


def web_process(serve) -> int | None:
    return next((pid for pid in children(serve.proc.pid) if is_daphne(pid)), None)


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_serve_applies_the_same_bounds(serve):
    until(lambda: listening(serve.port), 90, "serve's web process listens", serve)
    daphne = web_process(serve)
    before = rss(daphne)
    request = head("PUT", "/api/hosts/1/", f"Content-Length: {GIB}")
    assert "body is too large" in refusal(exchange(serve.port, request, pieces(SENT)), 413)
    assert rss(daphne) - before < SENT // 2
    request = head("GET", "/", f"Cookie: session={'c' * 100_000}")
    assert refusal(exchange(serve.port, request), 431)
