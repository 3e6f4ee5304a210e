"""Asking the workers a question from a request, and waiting a bounded time for the answer.

Requests never reach a host (see core.hostcalls). Where a page needs a host's
answer before it can reply (a free port for a distributed job, a sign-up's proof), the
request hands the question to the django-q2 workers and waits for the answer at most
``WORKER_ANSWER_SECONDS``: a web thread is held for a bounded time, never for as long as a
host takes. Outside a request (commands, the workers themselves, tests) the question is
answered in place.

A question is a function taking plain arguments and returning ``{"value": ...}`` or
``{"error": "message for the user"}``, so expected refusals travel as answers, not as
failed tasks.
"""

import time
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string
from django_q.models import Task as QTask
from django_q.tasks import async_task

from .hostcalls import serving_request

POLL_SECONDS = 0.1


class NoAnswer(Exception):
    """The workers said no, or gave no answer in time; ``str()`` is for the user."""


def answer(value: object) -> dict[str, object]:
    return {"value": value}


def refusal(message: str) -> dict[str, object]:
    return {"error": message}


def ask(func: str, *args: object, seconds: float | None = None) -> Any:
    """``func(*args)``'s value, computed by a worker when a request asks."""
    if serving_request.get() is None:
        return _value(import_string(func)(*args))
    try:
        task_id = async_task(func, *args)
    except Exception as exc:  # the broker (Redis) is gone: say so, do not fail the page
        raise NoAnswer(f"the background workers cannot be reached ({exc})") from None
    return _value(_wait(task_id, settings.WORKER_ANSWER_SECONDS if seconds is None else seconds))


def _wait(task_id: str, seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        done = QTask.objects.filter(id=task_id).values("success", "result").first()
        if done is not None:
            if not done["success"]:
                raise NoAnswer("the background workers failed on it (an admin sees why)")
            result: dict[str, Any] = done["result"]  # answer() or refusal() (module doc)
            return result
        if time.monotonic() >= deadline:
            raise NoAnswer(
                f"the background workers did not answer within {seconds:g} s (they may be "
                "busy or stopped); try again in a moment"
            )
        time.sleep(POLL_SECONDS)


def _value(result: dict[str, Any]) -> Any:
    if "error" in result:
        raise NoAnswer(result["error"])
    return result["value"]
