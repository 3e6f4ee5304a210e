"""Django's ASGI handler, with each request's middleware and view run in one thread.

Django's own handler builds the middleware chain for the event loop. Ours and WhiteNoise's
middleware and every view are synchronous, so a request then crosses between the loop and a
thread several times: into the synchronous middleware, back to the loop for the view's
resolution, out again for CSRF's ``process_view``, again for the view, and back for the
clickjacking middleware's answer. Each crossing schedules a thread and a future. Here the
chain is built for synchronous code and the whole of it runs in the request's thread, as
under WSGI: one crossing each way. Reading the body, the request signals and sending the
answer stay on the loop, as Django does them.
"""

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler


class OneThreadASGIHandler(ASGIHandler):
    def __init__(self):
        BaseHandler.__init__(self)  # ASGIHandler's own would build the chain for the loop
        self.load_middleware(is_async=False)

    async def get_response_async(self, request):
        # thread_sensitive: the request's own thread (ASGIHandler opens a
        # ThreadSensitiveContext per request), where its database connection lives.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
