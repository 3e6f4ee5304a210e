"""Bounds on every request, checked before a view (or the database) sees it.

- A body larger than ``REQUEST_MAX_BODY_BYTES`` is refused with 413 before it is read: by the
  web server itself (core/webserver.py, which ``serve`` and the systemd unit run: daphne
  would otherwise take in the whole body before the application sees any of it), and again by
  ``BodyLimit`` around the ASGI app and ``RequestLimits`` in Django, for any other server.
- A JSON body nested deeper than ``REQUEST_MAX_JSON_DEPTH`` is refused with 400: Python's
  parser recurses once per level and ends in ``RecursionError`` (a 500) near 1,000.
- A JSON body holding NUL in any string, keys included, is refused with 400: PostgreSQL
  cannot store it in text, and no name, title or parameter of ours needs it.

Answers have the API's error shape (``{"detail": ...}``), whatever the URL.
"""

import json
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase, JsonResponse

# The ASGI interface (asgi.readthedocs.io): scopes and messages are dicts keyed by "type".
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Strings (with their escapes) removed before counting brackets: "[[" inside a string is text.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


def too_large_detail() -> str:
    limit = settings.REQUEST_MAX_BODY_BYTES
    return f"The request body is too large: at most {limit} bytes are accepted."


def too_large_answer() -> JsonResponse:
    return JsonResponse({"detail": too_large_detail()}, status=413)


def json_depth(body: bytes) -> int:
    """How deep arrays and objects nest in a JSON text (0 for a bare value), without parsing."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_JSON_STRING.sub(b"", body)):
        depth += 1 if bracket in (b"[", b"{") else -1
        deepest = max(deepest, depth)
    return deepest


def has_nul(value: object) -> bool:
    """Whether NUL appears in any string of parsed JSON, object keys included."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(item) for item in value)
    return False


def json_refusal(body: bytes) -> str | None:
    """Why a JSON body is refused before any view reads it, or None."""
    limit = settings.REQUEST_MAX_JSON_DEPTH
    if json_depth(body) > limit:
        return f"The JSON body nests deeper than {limit} levels."
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None  # the view's parser says what is wrong, in its own words
    if has_nul(data):
        return "Text may not contain the NUL character (\\u0000), in names or values."
    return None


def _declared_length(headers: Mapping[str, str]) -> int | None:
    try:
        return int(headers.get("content-length") or "")
    except ValueError:
        return None


class RequestLimits:
    """Django middleware: the size, depth and NUL checks above, on every request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        length = _declared_length(request.headers)
        if length is not None and length > settings.REQUEST_MAX_BODY_BYTES:
            return too_large_answer()
        if "json" in (request.content_type or "") and request.body:
            reason = json_refusal(request.body)
            if reason:
                return JsonResponse({"detail": reason}, status=400)
        return self.get_response(request)


class BodyLimit:
    """ASGI wrapper: refuse an oversized body before Django spools it to disk."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        length = _declared_length(headers)
        limit = settings.REQUEST_MAX_BODY_BYTES
        if length is not None and length > limit:
            return await _send_too_large(send)
        body = _BoundedBody(receive, limit)
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, body.receive, tracked_send)
        if body.exceeded and not started:  # Django gave up on the cut-off request silently
            await _send_too_large(send)


class _BoundedBody:
    """``receive`` that ends the request (as a client disconnecting would) past ``limit``
    bytes: a body sent without a length cannot grow without end."""

    def __init__(self, receive: Receive, limit: int) -> None:
        self._receive = receive
        self.limit = limit
        self.seen = 0
        self.exceeded = False

    async def receive(self) -> Message:
        if self.exceeded:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            self.seen += len(message.get("body", b""))
            if self.seen > self.limit:
                self.exceeded = True
                return {"type": "http.disconnect"}
        return message


async def _send_too_large(send: Send) -> None:
    answer = too_large_answer()
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": answer.content})
