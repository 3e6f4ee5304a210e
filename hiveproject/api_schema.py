"""The API's OpenAPI schema: drf-spectacular's, plus the error answers every operation gives
(the shape core/api_errors.py answers with).

Kept apart from api_errors so that services, which raise its errors, do not load
drf-spectacular (and through it django.test, jinja2, requests, yaml) into every process: DRF
loads this module only when it builds the schema (DEFAULT_SCHEMA_CLASS).
"""

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from core.pagination import PAGE_HEADERS

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
        elif self.method == "GET" and self._is_paged():
            yield "404", "No such page: past the last one."
        yield "406", "The Accept header names no media type the API answers in (JSON)."
        if self.method in ("POST", "PUT", "PATCH"):
            yield "413", "The body is larger than the service accepts."
            yield "415", "The body's media type is not JSON, a form or multipart."
        if self.method in ("PUT", "PATCH", "DELETE"):
            yield "409", "Changed or cancelled since it was read; reload and try again."
        if getattr(self.view, "throttle_classes", None):
            yield "429", "Too many requests; retry after the time `detail` gives."


def empty_means_absent(result, generator, request, public):
    """drf-spectacular postprocessing hook: an optional query parameter sent empty (``?since=``)
    means what leaving it out means, as DRF reads an empty form value; the schema says so
    (``allowEmptyValue``), so that clients and schemathesis agree with the API on it."""
    for path in result.get("paths", {}).values():
        for operation in path.values():
            for parameter in operation.get("parameters", ()) if isinstance(operation, dict) else ():
                if parameter.get("in") == "query" and not parameter.get("required"):
                    parameter["allowEmptyValue"] = True
    return result
