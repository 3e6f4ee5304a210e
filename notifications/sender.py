"""The notifications sender: sends due deliveries, apart from everything else the workers do.

It runs in a process of its own, forked by the workers' supervisor (monitoring.supervisor),
so that a webhook that hangs holds one of the sender's threads, never a django-q2 worker
that launches, syncs or protects. Within the sender, one user's channels take at most
NOTIFY_SENDS_PER_USER of its NOTIFY_SENDER_THREADS threads, and the oldest due delivery of
the others goes first: one user's dead webhooks slow only their own deliveries.

Several senders (one per worker machine) may run: a delivery is claimed by a conditional
UPDATE that one sender wins (send.deliver).
"""

import logging
import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, connection

from core import lease

from .send import deliver, due

log = logging.getLogger(__name__)
ACTIVITY = "notifications"
TITLE = "hive notifications sender"
POLL_SECONDS = 1.0  # a new delivery waits at most this long for a free thread
HEARTBEAT_SECONDS = 5.0  # between the sender's records on its activity (admin, /healthz)


class Sender:
    """A pool of sending threads fed with due deliveries, fairly between users."""

    def __init__(self, threads: int | None = None, per_user: int | None = None):
        self.threads = threads or settings.NOTIFY_SENDER_THREADS
        self.per_user = per_user or settings.NOTIFY_SENDS_PER_USER
        self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="notify")
        self.lock = threading.Lock()
        self.in_flight: dict[int, int] = {}  # delivery id -> its channel's user id
        self.sent = self.unsent = 0  # tries, since the start

    def round(self) -> int:
        """Hand due deliveries to free threads, oldest first, no user beyond their share;
        returns how many were handed out."""
        with self.lock:
            taken = set(self.in_flight)
            busy = Counter(self.in_flight.values())
        full = {user for user, count in busy.items() if count >= self.per_user}
        handed = 0
        while len(taken) < self.threads:
            waiting = due().exclude(pk__in=taken).exclude(channel__user_id__in=full)
            row = waiting.order_by("next_try_at", "pk").values_list("pk", "channel__user_id")
            row = row.first()
            if row is None:
                break
            pk, user = row
            taken.add(pk)
            busy[user] += 1
            if busy[user] >= self.per_user:
                full.add(user)
            with self.lock:
                self.in_flight[pk] = user
            self.pool.submit(self._send, pk)
            handed += 1
        return handed

    def _send(self, pk: int) -> None:
        try:
            sent = deliver(pk)
            with self.lock:
                self.sent, self.unsent = self.sent + sent, self.unsent + (not sent)
        except Exception as exc:  # a bug or the database gone: seen by admins, not fatal
            log.exception("notifications: sending delivery %s failed", pk)
            record(lease.record_failure, f"sending delivery {pk}: {exc!r}")
        finally:
            with self.lock:
                self.in_flight.pop(pk, None)
            connection.close()  # this thread's own: a pool thread may sleep for hours

    def outstanding(self) -> int:
        with self.lock:
            return len(self.in_flight)

    def run(self, stop: threading.Event) -> None:
        """Rounds until ``stop`` is set; a heartbeat on the activity every few seconds."""
        beat = 0.0
        while not stop.is_set():
            close_old_connections()
            try:
                self.round()
            except Exception as exc:  # the database away: try again next round
                log.exception("notifications: a sending round failed")
                record(lease.record_failure, f"a sending round failed: {exc!r}")
            if time.monotonic() - beat >= HEARTBEAT_SECONDS:
                beat = time.monotonic()
                record(lease.record_success, self.summary())
            stop.wait(POLL_SECONDS)
        self.pool.shutdown(wait=False, cancel_futures=True)
        connection.close()  # this thread's own

    def summary(self) -> str:
        return (
            f"sender {os.getpid()}: {self.sent} sent, {self.unsent} not sent (failed), "
            f"{self.outstanding()} being sent"
        )


def record(how, text: str) -> None:
    try:
        how(ACTIVITY, text)
    except Exception:  # the database is away: the log has it
        log.exception("notifications: could not record on the activity")


def run_process() -> None:
    """The sender process's life (forked by the supervisor): until SIGTERM or SIGINT. Sends
    still under way are cut off with the process; their deliveries, left 'sending', are
    taken up again later (send.due)."""
    from django_q.conf import setproctitle

    if setproctitle:
        setproctitle.setproctitle(TITLE)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        # Set from a thread: the handler may interrupt the loop's own wait on the event.
        signal.signal(signum, lambda *_: threading.Thread(target=stop.set).start())
    Sender().run(stop)
