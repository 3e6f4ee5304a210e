"""Admin actions that carry out a service operation on each selected object: the service's
rules apply as on the pages and the API, and each refusal is said for its object."""

from collections.abc import Callable, Iterable
from typing import TypeVar

from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Model
from django.http import HttpRequest

from core.api_errors import Conflict

M = TypeVar("M", bound=Model)


def apply_each(
    modeladmin: "ModelAdmin[M]",
    request: HttpRequest,
    objects: Iterable[M],
    operation: Callable[[M, AbstractBaseUser | AnonymousUser], object],
    done: str,
) -> int:
    """``operation(obj, request.user)`` on each object; says which were refused and why, and
    how many were ``done``. Returns that number."""
    count = 0
    for obj in objects:
        try:
            operation(obj, request.user)
            count += 1
        except (ValidationError, PermissionDenied, Conflict) as exc:
            text = " ".join(getattr(exc, "messages", [str(exc)]))
            modeladmin.message_user(request, f"{obj}: {text}", messages.ERROR)
    if count:
        modeladmin.message_user(request, f"{count} {done}.", messages.SUCCESS)
    return count
