"""The API through the web server we ship (issue 20): schemathesis over the network, as a
user and as an admin, with every check; and bounded bodies refused before they are read while
other users keep being answered.

In-process fuzzing (test_fuzz.py) skips what only the server in front of Django does: ASGI
body handling, headers, streaming; and it runs on the embedded profile only. Here each
operation gets its schema examples and a generated request per persona. On PostgreSQL the
admin (who reaches every operation) also gets the coverage phase's positive cases: each
field's boundary values (longest strings, largest numbers, extreme dates), which pass
validation and reach the database, where PostgreSQL may refuse what SQLite takes (the
in-process fuzz sends them to SQLite). The negative cases are refused by the serializers
before any database and stay in-process. Few examples per operation by default, so CI
stays quick; HIVE_FUZZ_LIVE_EXAMPLES=50 HIVE_FUZZ_EXPLORE=1 searches deeper, with every
coverage case for both personas.
"""

import os
import socket

import httpx
import pytest
from django.conf import settings

from accesscontrol.services import ensure_default_group
from apitokens.services import issue_token
from monitoring.models import Device, Host
from reservations.services import create_reservation
from tests.webserver import shipped_server

from .conftest import tomorrow
from .test_fuzz import CHECKS, fuzz_settings, load_schema

EXAMPLES = int(os.environ.get("HIVE_FUZZ_LIVE_EXAMPLES", "1"))
EXPLORE = os.environ.get("HIVE_FUZZ_EXPLORE") == "1"
# On SQLite the in-process fuzz already sends the coverage cases to this database; over the
# network they add what another database refuses.
ON_SQLITE = "sqlite" in settings.DATABASES["default"]["ENGINE"]
as_admin = load_schema("all" if EXPLORE else None if ON_SQLITE else "positive")
as_user = load_schema("all" if EXPLORE else None)


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker):
    """The project's ASGI application (with its body limit) in the web server we ship, on
    the test database, with token sign-ins unthrottled (fuzzing would hit the limit)."""

    def setup():
        from rest_framework.throttling import ScopedRateThrottle

        django_db_blocker.unblock()
        ScopedRateThrottle.THROTTLE_RATES = {"tokens": "100000/minute"}

    with shipped_server(None, setup=setup) as url:
        yield url


@pytest.fixture
def live_lab(transactional_db, owner, other_user, admin_user):
    ensure_default_group()
    host = Host.objects.create(name="node-1", address="127.0.0.1", port=9, status=Host.Status.UP)
    gpus = [Device.objects.create(host=host, index=i, uuid=f"GPU-{i}") for i in range(2)]
    create_reservation(owner, title="ours", devices=gpus, start=tomorrow(9), end=tomorrow(12))
    return gpus


@pytest.fixture
def live_auth(persona, request, live_lab):
    secret = issue_token(request.getfixturevalue(persona), "fuzz")[1]
    return {"Authorization": f"Bearer {secret}"}


@pytest.mark.parametrize("persona", ["admin_user"])
@as_admin.parametrize()
@fuzz_settings(EXAMPLES)
def test_no_operation_fails_or_breaks_the_schema_over_the_network_for_an_admin(
    case, web, live_auth
):
    case.call_and_validate(base_url=web, headers=live_auth, checks=CHECKS, timeout=30)


@pytest.mark.parametrize("persona", ["owner"])
@as_user.parametrize()
@fuzz_settings(EXAMPLES)
def test_no_operation_fails_or_breaks_the_schema_over_the_network_for_a_user(case, web, live_auth):
    case.call_and_validate(base_url=web, headers=live_auth, checks=CHECKS, timeout=30)


def test_a_form_body_twisted_cannot_parse_gets_the_apis_answer(web):
    """Twisted parses form bodies itself unless told not to; the server we ship tells it, so
    Django answers (here: not signed in) instead of Twisted's bare 400."""
    boundary = "c637e12e2b1a998d80d1b087531af51c"
    answer = httpx.post(
        f"{web}/api/placement/",
        content=f"--{boundary}--\r\n".encode(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        timeout=30,
    )
    assert answer.status_code == 403, answer.content
    assert answer.headers["content-type"] == "application/json" and answer.json()["detail"]


def test_an_oversized_body_is_refused_while_others_are_served(web, live_lab, owner):
    """The server refuses a body its head declares too large before taking it in
    (core.webserver), and users are served meanwhile."""
    secret = issue_token(owner, "big")[1]
    host, port = web.removeprefix("http://").split(":")
    size = settings.REQUEST_MAX_BODY_BYTES + 1
    with socket.create_connection((host, int(port)), timeout=30) as big:
        big.sendall(
            b"POST /api/reservations/ HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {size}\r\n\r\n".encode()
            + b"[" * (size // 2)
        )
        bystander = httpx.get(
            f"{web}/api/devices/", headers={"Authorization": f"Bearer {secret}"}, timeout=30
        )
        assert bystander.status_code == 200 and len(bystander.json()) == 2
        big.sendall(b"[" * (size - size // 2))
        answer = big.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"The request body is too large" in answer


def test_a_body_without_a_length_is_cut_at_the_limit(web, live_lab, owner):
    secret = issue_token(owner, "chunked")[1]

    def endless():
        chunk = b" " * 65536
        for _ in range(settings.REQUEST_MAX_BODY_BYTES // len(chunk) + 10):
            yield chunk

    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    url = f"{web}/api/reservations/"
    response = httpx.post(url, content=endless(), headers=headers, timeout=30)
    assert response.status_code == 413, response.text
    bystander = httpx.get(f"{web}/api/devices/", headers={"Authorization": f"Bearer {secret}"})
    assert bystander.status_code == 200
