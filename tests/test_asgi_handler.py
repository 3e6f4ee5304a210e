"""The ASGI entry point runs each request's middleware and view in one thread
(hiveproject/asgi_handler.py): the chain is synchronous, and requests still get answers."""

import asyncio

import pytest
from asgiref.sync import iscoroutinefunction
from channels.testing import HttpCommunicator

from hiveproject.asgi import application, django_asgi_app


def test_the_middleware_chain_is_built_for_one_thread():
    # Django's own ASGI handler builds it as a coroutine, crossing to threads and back.
    assert not iscoroutinefunction(django_asgi_app._middleware_chain)


@pytest.mark.django_db(transaction=True)
def test_requests_are_answered_through_the_asgi_application(owner):
    from apitokens.services import issue_token

    _, secret = issue_token(owner, "asgi")
    headers = [(b"host", b"localhost"), (b"authorization", f"Bearer {secret}".encode())]

    async def get(path):
        return await HttpCommunicator(application, "GET", path, headers=headers).get_response()

    answer = asyncio.run(get("/api/reservations/"))
    assert answer["status"] == 200 and answer["body"] == b"[]"
    refused = asyncio.run(get("/api/reservations/?page=0"))  # an error through the same path
    assert refused["status"] == 400 and b"whole number" in refused["body"]
