"""Django's ASGI handler, with each request's middleware and view run in one thread, and the
threads kept for later requests.

Django's own handler builds the middleware chain for the event loop. Ours and WhiteNoise's
middleware and every view are synchronous, so a request then crosses between the loop and a
thread several times: into the synchronous middleware, back to the loop for the view's
resolution, out again for CSRF's ``process_view``, again for the view, and back for the
clickjacking middleware's answer. Each crossing schedules a thread and a future. Here the
chain is built for synchronous code and the whole of it runs in the request's thread, as
under WSGI: one crossing each way. Reading the body, the request signals and sending the
answer stay on the loop, as Django does them.

Django also starts a thread for every request (its ``ThreadSensitiveContext``) and joins it
at the end: about a tenth of the web process's CPU for a small API request. Here a request
borrows an idle one-thread executor and gives it back (asgiref lets the context use an
executor its caller owns), so threads, and Django's per-thread database connections, live
on from one request to the next, as in a WSGI server's thread pool. A request still has its
thread to itself: every thread-sensitive call it makes (the request signals, which close or
recycle its database connections, the middleware and view, closing the answer) runs there,
one after another, and no other request's.
"""

import os
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler


class RequestThread(ThreadPoolExecutor):
    """One thread, which knows whether something it was given is still running (a view that
    goes on after its client left, which Django lets finish in its thread)."""

    def __init__(self):
        super().__init__(max_workers=1, thread_name_prefix="request")
        self.pending = set()

    def submit(self, fn, /, *args, **kwargs):
        future = super().submit(fn, *args, **kwargs)
        self.pending.add(future)
        future.add_done_callback(self.pending.discard)
        return future


class IdleThreads:
    """The request threads waiting for a request. Taken and given back on the event loop
    only, so no lock. A thread given back ends instead of waiting when it still works, when
    ``keep`` others wait already, or when its request did not end as Django ends one (the
    server cancelled it): then its database connections may not have been closed or given
    back to their pool, and end with it.

    A process forked after requests were served (a pre-forking server, the test servers)
    inherits copies of the idle executors but not their threads: work given to one would
    wait forever. So the first request in a new process forgets them."""

    def __init__(self, keep: int = 16):
        self.keep = keep
        self.idle: list[RequestThread] = []
        self.pid = os.getpid()

    def take(self) -> RequestThread:
        if self.pid != os.getpid():
            self.idle, self.pid = [], os.getpid()
        return self.idle.pop() if self.idle else RequestThread()

    def give_back(self, thread: RequestThread, reusable: bool = True) -> None:
        if not reusable or thread.pending or len(self.idle) >= self.keep:
            thread.shutdown(wait=False)  # it ends once its work is done; nobody waits
        else:
            self.idle.append(thread)


class OneThreadASGIHandler(ASGIHandler):
    def __init__(self):
        BaseHandler.__init__(self)  # ASGIHandler's own would build the chain for the loop
        self.load_middleware(is_async=False)
        self.threads = IdleThreads()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":  # as Django's: websockets are routed to Channels
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        thread = self.threads.take()
        ended = False
        try:
            async with ThreadSensitiveContext(executor=thread):
                await self.handle(scope, receive, send)
            ended = True
        finally:
            self.threads.give_back(thread, reusable=ended)

    async def get_response_async(self, request):
        # thread_sensitive: the request's own thread (above), where its connection lives.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
