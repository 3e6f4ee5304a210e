"""One error shape for the whole API, and its place in the OpenAPI schema.

Every error answer is a JSON object with a human ``detail``; a refused input also names each
field it refuses, with a list of messages: ``{"detail": "end: The end must be after the
start.", "end": ["The end must be after the start."]}``. This is the shape the reservations
and access-control endpoints already gave, so clients that read field keys keep working;
the handler adds the ``detail`` where DRF leaves it out and turns a Django ``ValidationError``
raised by a service (booking rules, access refusals) into a 400 instead of a 500.
"""

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import JsonResponse
from django.views import defaults
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers
from rest_framework.views import exception_handler as drf_exception_handler

from hiveproject.pagination import PAGE_HEADERS
from hiveproject.sqlite3.base import is_locked

ERROR_SCHEMA = {
    "type": "object",
    "description": (
        "Every error answer. `detail` is a message for people; a refused input also has one "
        "key per refused field (or `non_field_errors`) holding a list of messages (nested "
        "objects and lists for nested fields)."
    ),
    "properties": {"detail": {"type": "string", "description": "What went wrong, for people."}},
    "required": ["detail"],
    "additionalProperties": {"description": "Messages about the field of this name."},
}


def exception_handler(exc, context):
    """DRF's handler, then the shape above on whatever it answers."""
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
    """Middleware: a page (or a pages' JSON endpoint) whose write found the database locked
    gets the same 503 as the API, not a 500."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        return busy_answer() if is_locked(exception) else None


def not_found(request, exception):
    """Django's 404 (a URL no route matches, e.g. /api/grants/abc/): JSON under /api/."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    """Django's 500 (the database is down, a bug): the same error shape under /api/, so API
    clients parse it like any other error; nothing of the cause is shown."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "Server error: try again later."}, status=500)
    return defaults.server_error(request)


def _django_messages(exc: DjangoValidationError):
    if hasattr(exc, "error_dict"):
        return exc.message_dict
    return {"detail": " ".join(exc.messages)}


def with_detail(data) -> dict:
    """``data`` as an object that has a human ``detail`` (field errors stay as they are)."""
    if isinstance(data, dict):
        if "detail" in data:
            return data
        return {"detail": summary(data), **data}
    return {"detail": summary(data)}


def summary(errors, field: str = "") -> str:
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


class ErrorSerializer(serializers.Serializer):
    """The error shape, for views that name an error answer in ``extend_schema``."""

    detail = serializers.CharField()


class ErrorSchema(OpenApiSerializerExtension):
    target_class = ErrorSerializer

    def get_name(self, auto_schema, direction):
        return "Error"

    def map_serializer(self, auto_schema, direction):
        return ERROR_SCHEMA


class HiveAutoSchema(AutoSchema):
    """drf-spectacular's schema plus the error answers every operation can give.

    403 (not signed in, or not allowed), 400 (refused input) and 406 (an Accept header
    nothing satisfies) everywhere, 404 wherever the path names an object, 415 for bodies,
    429 on throttled views. What a view documents itself is kept, so
    new endpoints get their errors documented without doing anything.
    """

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code, description in self._error_answers():
            if code not in responses:
                answer = OpenApiResponse(ErrorSerializer, description=description)
                responses[code] = self._get_response_for_code(answer, code, direction=direction)
        return responses

    def _get_response_headers_for_code(self, status_code, direction="response"):
        headers = super()._get_response_headers_for_code(status_code, direction)
        if status_code == "200" and self.method == "GET" and self._is_paged():
            headers = {**PAGE_HEADERS, **headers}
        return headers

    def _is_paged(self) -> bool:
        return self._is_list_view() and self._get_paginator() is not None

    def _is_list_view(self, serializer=None):
        # A view whose "list" answers one object (e.g. a summary) says so with this flag.
        if getattr(self.view, "answers_one_object", False):
            return False
        return super()._is_list_view(serializer)

    def _error_answers(self):
        yield "400", "The input was refused; each refused field is named."
        yield "403", "Not signed in, or not allowed."
        if "{" in self.path:
            yield "404", "No such object, or not visible to you."
        yield "406", "The Accept header names no media type the API answers in (JSON)."
        if self.method in ("POST", "PUT", "PATCH"):
            yield "413", "The body is larger than the service accepts."
            yield "415", "The body's media type is not JSON, a form or multipart."
        if self.method in ("PUT", "PATCH", "DELETE"):
            yield "409", "Changed or cancelled since it was read; reload and try again."
        if getattr(self.view, "throttle_classes", None):
            yield "429", "Too many requests; retry after the time `detail` gives."
