"""Probe sessions: one long-lived probe loop per host, asked for a sample each cycle.

A one-shot probe opens an SSH channel, starts a shell and closes the channel again: a dozen
packets and most of the service's CPU per host and cycle. A session starts SESSION_SCRIPT
once over the host's persistent connection; then each cycle the loop writes one line and
reads one answer (a packet each way), and waits for all hosts' answers on one selector
instead of a thread per host. The session ends when its channel closes (the remote loop was
killed, the host rebooted, the connection dropped); the loop then starts a new one, which is
the one-shot path's work again: connecting, with the pool's pauses after failures.
"""

from __future__ import annotations

import selectors
import time
from typing import TYPE_CHECKING

from .connections import pool
from .models import Host
from .probes import (
    SESSION_END,
    ProbeResult,
    finish,
    interpret,
    probe_timeout,
    session_argv,
    timed_out,
    wants_versions,
)
from .transport import TransportError, Unreachable, channel_errors, wait_readable

if TYPE_CHECKING:
    import paramiko

END = f"\n{SESSION_END}\n".encode()


class ProbeSession:
    """One host's remote probe loop: ask() writes a question, answer() reads the sample."""

    def __init__(self, host: Host, channel: paramiko.Channel):
        self.host = host
        self.channel = channel
        self.buffer = bytearray()
        self.asked_at: float | None = None  # when the unanswered question was written
        self.versions = False
        self.seconds: float | None = None  # how long the last answer took

    def ask(self, host: Host, versions: bool) -> None:
        """Ask for one sample (with driver versions if asked); raises one of
        transport.channel_errors()."""
        self.channel.sendall(b"1\n" if versions else b"0\n")
        self.host, self.versions, self.asked_at = host, versions, time.monotonic()

    def answer(self) -> str | None:
        """The sample once it has all arrived; reads what is there and never waits."""
        while self.channel.recv_ready():
            self.buffer += self.channel.recv(65536)
        while self.channel.recv_stderr_ready():  # e.g. a login script's complaints
            self.channel.recv_stderr(65536)
        end = self.buffer.find(END)
        if end < 0:
            return None
        text = self.buffer[:end].decode(errors="replace")
        del self.buffer[: end + len(END)]
        if self.asked_at is not None:
            self.seconds = time.monotonic() - self.asked_at
        self.asked_at = None
        return text

    def wait(self, deadline: float) -> str | None:
        """The answer, waiting for it until the deadline or the session's end."""
        while True:
            text = self.answer()
            remaining = deadline - time.monotonic()
            if text is not None or self.ended or remaining <= 0:
                return text
            wait_readable(self.channel, remaining)

    def result(self, text: str) -> ProbeResult:
        return finish(self.host, interpret(self.host, text), self.versions)

    @property
    def ended(self) -> bool:
        """The remote loop or the connection ended."""
        return self.channel.closed or self.channel.eof_received

    def overdue(self, now: float) -> bool:
        """Asked longer ago than any probe may take: the host hangs or the network dropped."""
        return self.asked_at is not None and now - self.asked_at > probe_timeout()

    def close(self) -> None:
        self.channel.close()


def start_session(host: Host) -> tuple[ProbeResult, ProbeSession | None]:
    """Start host's session and take its first sample; blocks (runs in a probe thread).

    Returns the session only when it answered: any failure is the probe's result.
    """
    versions = wants_versions(host)
    session = None
    try:
        session = ProbeSession(host, pool.start(host, session_argv()))
        session.ask(host, versions)
        text = session.wait(time.monotonic() + probe_timeout())
    except TransportError as exc:
        return finish(host, ProbeResult(host.name, False, exc.status, str(exc)), versions), None
    except channel_errors() as exc:
        session.close()
        lost = Unreachable(f"connection to {host.address} lost: {exc or type(exc).__name__}")
        return finish(host, ProbeResult(host.name, False, lost.status, str(lost)), versions), None
    if text is None:
        session.close()
        reason = "the session ended" if session.ended else f"no answer in {probe_timeout():g}s"
        return finish(host, timed_out(host, reason), versions), None
    return session.result(text), session


class Sessions:
    """The loop's sessions by host id, and one selector that waits on all of them."""

    def __init__(self):
        self.by_host: dict[int, ProbeSession] = {}
        self.selector = selectors.DefaultSelector()

    def add(self, session: ProbeSession) -> None:
        self.discard(session.host.pk)
        self.by_host[session.host.pk] = session
        self.selector.register(session.channel.fileno(), selectors.EVENT_READ, session)

    def usable(self, host: Host) -> ProbeSession | None:
        """host's session, unless it ended or the host's connection settings changed."""
        session = self.by_host.get(host.pk)
        if session is not None and (session.ended or not pool.same_connection(host)):
            self.discard(host.pk)
            return None
        return session

    def discard(self, host_id: int) -> None:
        session = self.by_host.pop(host_id, None)
        if session is not None:
            self.selector.unregister(session.channel.fileno())
            session.close()

    def collect(self, deadline: float) -> tuple[list[tuple[ProbeSession, str]], list[Host]]:
        """Answers to the questions asked, as they come until the deadline; and the hosts
        whose session ended meanwhile (their sessions are discarded)."""
        waiting = {pk for pk, s in self.by_host.items() if s.asked_at is not None}
        answers, ended = [], []
        while waiting and (remaining := deadline - time.monotonic()) > 0:
            for key, _ in self.selector.select(remaining):
                session = key.data
                pk = session.host.pk
                text = session.answer()
                if session.ended:
                    self.discard(pk)
                if pk not in waiting:
                    # It answered earlier in this round and has ended since: the next
                    # cycle starts it again. Reported now, the host would be probed and
                    # recorded twice in one cycle.
                    continue
                if text is not None:
                    answers.append((session, text))
                elif session.ended:
                    ended.append(session.host)
                else:
                    continue
                waiting.discard(pk)
        return answers, ended

    def overdue(self) -> list[tuple[Host, ProbeResult]]:
        """Sessions asked too long ago: discarded, with their connections (a dropped
        network leaves a connection that looks open), and reported as timed out."""
        now, late = time.monotonic(), []
        for pk, session in list(self.by_host.items()):
            if session.overdue(now):
                self.discard(pk)
                pool.close(pk)
                result = timed_out(session.host, f"no answer in {probe_timeout():g}s")
                late.append((session.host, finish(session.host, result, session.versions)))
        return late

    def close(self) -> None:
        for pk in list(self.by_host):
            self.discard(pk)
        self.selector.close()
