"""The ASGI entry point runs each request's middleware and view in one thread, kept for
later requests (hiveproject/asgi_handler.py): the chain is synchronous, requests still get
answers, and threads are reused."""

import asyncio
import multiprocessing
import os
import threading

import pytest
from asgiref.sync import iscoroutinefunction
from channels.testing import HttpCommunicator

from hiveproject.asgi import application, django_asgi_app
from hiveproject.asgi_handler import IdleThreads


def test_the_middleware_chain_is_built_for_one_thread():
    # Django's own ASGI handler builds it as a coroutine, crossing to threads and back.
    assert not iscoroutinefunction(django_asgi_app._middleware_chain)


async def answer(path: str, secret: str) -> dict:
    """The answer to a GET, once the request has ended as a server lets it end."""
    headers = [(b"host", b"localhost"), (b"authorization", f"Bearer {secret}".encode())]
    communicator = HttpCommunicator(application, "GET", path, headers=headers)
    response = await communicator.get_response(timeout=30)
    await communicator.wait(timeout=30)
    return response


@pytest.mark.django_db(transaction=True)
def test_requests_are_answered_through_the_asgi_application(owner_secret):
    response = asyncio.run(answer("/api/reservations/", owner_secret))
    assert response["status"] == 200 and response["body"] == b"[]"
    refused = asyncio.run(answer("/api/reservations/?page=0", owner_secret))  # an error answer
    assert refused["status"] == 400 and b"whole number" in refused["body"]


@pytest.mark.django_db(transaction=True)
def test_requests_one_after_another_reuse_one_thread(owner_secret):
    """Django would start a thread per request and join it at the end; ours are kept."""
    django_asgi_app.threads.idle.clear()
    before = set(threading.enumerate())

    async def three():
        for _ in range(3):
            assert (await answer("/api/reservations/", owner_secret))["status"] == 200

    asyncio.run(three())
    started = [t for t in threading.enumerate() if t not in before]
    assert [t.name for t in started] == ["request_0"]
    assert len(django_asgi_app.threads.idle) == 1


def test_a_thread_still_working_cut_off_or_beyond_the_idle_limit_is_not_kept():
    threads = IdleThreads(keep=1)
    kept, busy, cut, extra = (threads.take() for _ in range(4))
    assert len({kept, busy, cut, extra}) == 4
    release = threading.Event()
    busy.submit(release.wait)  # a view still running after its client left
    threads.give_back(kept)
    threads.give_back(busy)
    threads.give_back(cut, reusable=False)  # a request the server cancelled
    threads.give_back(extra)
    assert threads.idle == [kept]
    assert threads.take() is kept
    release.set()
    busy.shutdown(wait=True)
    assert not busy.pending
    assert busy._shutdown and cut._shutdown and extra._shutdown


def test_a_forked_process_starts_threads_of_its_own():
    """A process forked after requests were served (the test servers are) inherits the idle
    executors but not their threads: work given to one would wait forever, and the first
    request in the child hung until its client gave up."""
    threads = IdleThreads()
    served = threads.take()
    served.submit(int).result()  # its thread starts
    threads.give_back(served)  # and waits, in this process
    forked = multiprocessing.get_context("fork")
    answers = forked.SimpleQueue()

    def serve_one():
        answers.put(threads.take().submit(os.getpid).result(timeout=10))

    child = forked.Process(target=serve_one)
    child.start()
    child.join(timeout=30)
    assert child.exitcode == 0 and answers.get() == child.pid
