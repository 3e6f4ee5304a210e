"""The django-q2 workers' side of the tests: what the cluster would do with queued tasks.

``run_queued()`` takes every task off the broker and runs it as a worker does (the result
saved by django-q2's own ``save_task``, a failure recorded with its traceback), in the
test's thread and outside any request, keeping the test's database connection (a worker
process would close its own). ``Workers`` does the same in a thread, for requests that wait on the
workers' answer (then the test needs ``transaction=True``, so the thread sees its rows).
"""

import pydoc
import threading
import traceback

from django.db import connection
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.monitor import save_task
from django_q.signing import BadSignature, SignedPackage


def discard_queued() -> None:
    """Drop what earlier tests left on the broker (Redis keeps it across tests)."""
    get_broker().purge_queue()


def run_queued(limit: int = 1000) -> int:
    """Run what is queued now (and what those tasks queue); how many ran."""
    broker, ran = get_broker(), 0
    while ran < limit and (batch := broker.dequeue()):
        for ack_id, package in batch:
            try:
                task = SignedPackage.loads(package)
            except (TypeError, BadSignature):
                # Signed with another key: another process's task (a server a test started
                # and stopped, on the shared Redis). django-q2's pusher fails it the same way.
                broker.fail(ack_id)
                continue
            run(task, broker)
            broker.acknowledge(ack_id)
            ran += 1
    return ran


def run(task: dict, broker) -> None:
    task["started"] = timezone.now()
    try:
        func = pydoc.locate(task["func"]) if isinstance(task["func"], str) else task["func"]
        task["result"], task["success"] = func(*task["args"], **task["kwargs"]), True
    except Exception as exc:
        task["result"], task["success"] = f"{exc} : {traceback.format_exc()}", False
    task["stopped"] = timezone.now()
    task["sync"] = True  # tells save_task to keep the database connection
    save_task(task, broker)


class Workers:
    """``with Workers():`` runs queued tasks in a thread until the block ends."""

    def __init__(self, step: float = 0.05):
        self.step, self.done = step, threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        try:
            while not self.done.wait(self.step):
                run_queued()
        finally:
            connection.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(timeout=60)
