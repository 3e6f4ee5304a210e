"""One error shape for the whole API (its place in the OpenAPI schema: hiveproject/api_schema).

Every error answer is a JSON object with a human ``detail``; a refused input also names each
field it refuses, with a list of messages: ``{"detail": "end: The end must be after the
start.", "end": ["The end must be after the start."]}``. This is the shape the reservations
and access-control endpoints already gave, so clients that read field keys keep working;
the handler adds the ``detail`` where DRF leaves it out and turns a Django ``ValidationError``
raised by a service (booking rules, access refusals) into a 400 instead of a 500.

The site's error pages are answered here too (404, 500, a refused form): JSON under /api/,
the site's templates (templates/4xx.html, 500.html) elsewhere.
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.views import defaults
from django.views.decorators.csrf import requires_csrf_token
from rest_framework import exceptions
from rest_framework.response import Response

from core.sqlite3.base import is_locked


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | JsonResponse | None:
    """DRF's handler, then the shape above on whatever it answers."""
    # Imported here: rest_framework.views loads DRF's schemas and authentication classes,
    # which processes that only raise Conflict (workers) do not need.
    from rest_framework.views import exception_handler as drf_exception_handler

    if is_locked(exc):
        return busy_answer()
    if isinstance(exc, Conflict):
        exc = ConflictError(str(exc))
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(_django_messages(exc))
    response = drf_exception_handler(exc, context)
    if response is not None:
        response.data = with_detail(response.data)
    return response


class Conflict(Exception):  # noqa: N818 (a refusal, named like Django's PermissionDenied)
    """An edit of something changed or cancelled since it was read: answered 409 with the
    message. Raised by services (they know what changed), so pages and API agree."""


class ConflictError(exceptions.APIException):
    status_code = 409
    default_detail = "Changed meanwhile; reload and try again."
    default_code = "conflict"


def busy_answer() -> JsonResponse:
    """503 for a write the database could not take in DATABASE_LOCK_WAIT (SQLite only)."""
    seconds = settings.DATABASE_RETRY_AFTER
    answer = JsonResponse(
        {"detail": f"The service is busy writing; try again in {seconds} seconds."}, status=503
    )
    answer["Retry-After"] = str(seconds)
    return answer


class BusyDatabase:
    """Middleware: a page whose write found the database locked gets the same 503 as the
    API, not a 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> JsonResponse | None:
        return busy_answer() if is_locked(exception) else None


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 (a URL no route matches, e.g. /api/grants/abc/): JSON under /api/."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's 500 (the database is down, a bug): the same error shape under /api/, so API
    clients parse it like any other error; nothing of the cause is shown."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "Server error: try again later."}, status=500)
    return defaults.server_error(request)


@requires_csrf_token
def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A refused form in the site's design, with the menu (Django's own page has neither);
    the technical reason stays out of the page."""
    return render(request, "403_csrf.html", status=403)


def _django_messages(exc: DjangoValidationError) -> dict[str, Any]:
    if hasattr(exc, "error_dict"):
        return exc.message_dict
    return {"detail": " ".join(exc.messages)}


def with_detail(data: object) -> dict[str, Any]:
    """``data`` as an object that has a human ``detail`` (field errors stay as they are)."""
    if isinstance(data, dict):
        if "detail" in data:
            return data
        return {"detail": summary(data), **data}
    return {"detail": summary(data)}


def summary(errors: object, field: str = "") -> str:
    """All messages in one line, each prefixed by the field it is about."""
    if isinstance(errors, dict):
        parts = [summary(value, _path(field, key)) for key, value in errors.items()]
    elif isinstance(errors, list):
        nested = any(isinstance(item, dict | list) for item in errors)
        parts = [
            summary(item, _path(field, str(i)) if nested else field)
            for i, item in enumerate(errors)
        ]
    else:
        return f"{field}: {errors}" if field else str(errors)
    return " ".join(part for part in parts if part)


def _path(field: str, key: str) -> str:
    if key in ("non_field_errors", "detail"):
        return field
    return f"{field}.{key}" if field else key
