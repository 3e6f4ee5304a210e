"""Violation handlers: what happens once an intruder is recorded.

VIOLATION_HANDLERS lists them in order, each as
``{"handler": "dotted.path", "options": {...}, "name": "...", "repeat_seconds": N}``
(``name`` defaults to the path; ``repeat_seconds``, if set, runs the handler again for a
continuing intrusion at most that often; otherwise it runs once per violation).

Each handler runs as its own django-q2 task over the violations of one cycle, so a slow one
never slows detection or the others. Every run is recorded on the violation (HandlerRun);
one that raises is logged and recorded as failed, and the next violation and the other
handlers go on regardless.

A handler is either a function ``handle(violation, **options) -> str`` (the text is the
run's outcome), or a subclass of :class:`Handler` when it needs state across one cycle's
violations (e.g. a cap on mails per cycle). Raise :class:`Skip` to record "did nothing,
because ...". See ``protection/handlers/examples.py``.
"""

import logging
from collections import Counter
from functools import partial

from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.module_loading import import_string

from core import lease

from .. import config
from ..models import HandlerRun, Violation

log = logging.getLogger(__name__)

ACTIVITY = "protection-handlers"


class Skip(Exception):
    """Raised by a handler that chose to do nothing for this violation; the text says why."""


class Handler:
    """Base of stateful handlers: one instance per task, i.e. per cycle's batch."""

    def __init__(self, name: str = "", **options):
        self.name = name
        self.options = options

    def handle(self, violation: Violation) -> str:
        raise NotImplementedError


class FunctionHandler(Handler):
    """Wraps a plain function ``handle(violation, **options)``."""

    def __init__(self, function, name: str = "", **options):
        super().__init__(name, **options)
        self.function = function

    def handle(self, violation: Violation) -> str:
        return self.function(violation, **self.options)


def entry_name(entry: dict) -> str:
    return entry.get("name") or entry["handler"]


def load(entry: dict) -> Handler:
    """An instance of the configured handler, with its options (bad options raise here)."""
    target = import_string(entry["handler"])
    options = entry.get("options", {})
    if isinstance(target, type):
        return target(name=entry_name(entry), **options)
    return FunctionHandler(target, name=entry_name(entry), **options)


# --- queueing (called by detection, inside its transaction) ----------------------------------


def queue_handlers(opened: list[Violation], continuing: list[Violation]) -> None:
    """Queue one task per handler with the violations due for it, once detection commits."""
    entries = config.handler_entries()
    for index, violation_ids in due_runs(entries, opened, continuing).items():
        transaction.on_commit(partial(_enqueue, index, entry_name(entries[index]), violation_ids))


def due_runs(entries, opened, continuing) -> dict[int, list[int]]:
    """{handler index: violation ids}: new violations for all, continuing ones for repeaters."""
    due = {i: [v.pk for v in opened] for i in range(len(entries)) if opened}
    repeating = {
        i: e["repeat_seconds"] for i, e in enumerate(entries) if e.get("repeat_seconds") is not None
    }
    if not (continuing and repeating):
        return due
    last = _last_runs(continuing, [entry_name(entries[i]) for i in repeating])
    now = timezone.now()
    for index, seconds in repeating.items():
        name = entry_name(entries[index])
        for violation in continuing:
            ran = last.get((violation.pk, name))
            if ran is None or (now - ran).total_seconds() >= float(seconds):
                due.setdefault(index, []).append(violation.pk)
    return due


def _last_runs(violations, names) -> dict[tuple[int, str], object]:
    rows = (
        HandlerRun.objects.filter(violation__in=violations, handler__in=names)
        .values("violation", "handler")
        .annotate(last=Max("started_at"))
    )
    return {(row["violation"], row["handler"]): row["last"] for row in rows}


def _enqueue(index: int, name: str, violation_ids: list[int]) -> None:
    task = "protection.handlers.run_handler"
    lease.enqueue(ACTIVITY, task, index, name, violation_ids, task_name=f"protection: {name}"[:100])


# --- running (the django-q2 task) ------------------------------------------------------------


def run_handler(index: int, name: str, violation_ids: list[int]) -> str:
    """The task: run one configured handler for each violation, each run recorded."""
    entries = config.handler_entries()
    if index >= len(entries) or entry_name(entries[index]) != name:
        return f"{name} is no longer configured; nothing done"
    try:
        handler = load(entries[index])
    except Exception as exc:  # e.g. a typo in the path or an unknown option
        handler = exc
    violations = Violation.objects.filter(pk__in=violation_ids).select_related(
        "device__host", "reservation", "reservation_owner", "offender"
    )
    outcomes = Counter(run_one(handler, name, v) for v in violations)
    summary = f"{name}: " + ", ".join(f"{n} {status}" for status, n in sorted(outcomes.items()))
    if outcomes[HandlerRun.Status.FAILED] == 0:
        lease.record_success(ACTIVITY, summary)
    return summary


def run_one(handler: Handler | Exception, name: str, violation: Violation) -> str:
    """Run and record one handler for one violation; never raises."""
    run = HandlerRun.objects.create(violation=violation, handler=name, started_at=timezone.now())
    try:
        if isinstance(handler, Exception):
            raise handler
        run.outcome = str(handler.handle(violation) or "done")[:255]
        run.status = HandlerRun.Status.DONE
    except Skip as skip:
        run.status, run.outcome = HandlerRun.Status.SKIPPED, str(skip)[:255]
    except Exception as exc:
        log.exception("protection: handler %s failed on violation %s", name, violation.pk)
        run.status, run.error = HandlerRun.Status.FAILED, f"{type(exc).__name__}: {exc}"
        lease.record_failure(ACTIVITY, f"{name} failed on violation {violation.pk}: {run.error}")
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "outcome", "error", "finished_at"])
    return run.status
