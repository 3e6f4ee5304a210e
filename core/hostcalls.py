"""Requests never reach a host: SSH and local commands belong to the workers.

While a request is served (``NoHostCalls``, the outermost middleware) every transport asks
``refuse_in_request`` first and raises ``HostCallInRequest``, so a view that would wait on a
host fails in the tests that visit it instead of holding a web thread for as long as a host
takes to answer. ``core.workers.ask`` reads the same mark to hand its question to the workers.
"""

import contextvars
from collections.abc import Callable, Sequence

from django.http import HttpRequest, HttpResponseBase


class HostCallInRequest(RuntimeError):
    """A host was called while a web request was served: such calls belong to the workers.

    Not a TransportError on purpose: callers that turn those into messages for users must
    not hide this one."""


# Set by NoHostCalls while a request is served (the request's path).
serving_request: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "serving_request", default=None
)


def refuse_in_request(argv: Sequence[str]) -> None:
    """HostCallInRequest while a web request is served: every transport asks this first."""
    path = serving_request.get()
    if path is not None:
        raise HostCallInRequest(
            f"{argv[0]!r} would run on a host while serving {path}: host calls belong to the "
            "workers (enqueue the work and show its progress)"
        )


class NoHostCalls:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        token = serving_request.set(request.path)
        try:
            return self.get_response(request)
        finally:
            serving_request.reset(token)
