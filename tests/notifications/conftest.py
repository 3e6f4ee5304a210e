"""A real local HTTP receiver for webhooks (the real SMTP receiver: tests/mailbox.py)."""

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.protection.conftest import booking, node, probe, tasks_run_inline  # noqa: F401


class Receiver(ThreadingHTTPServer):
    """Records each POST's path and JSON body; answers ``fail_next`` requests with 500."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.received: list[tuple[str, dict]] = []
        self.hosts: list[str] = []  # each request's Host header
        self.fail_next = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.hosts.append(self.headers.get("Host"))
        if self.server.fail_next:
            self.server.fail_next -= 1
            self.send_response(500)
        else:
            self.server.received.append((self.path, body))
            self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver(settings):
    """The receiver listens on loopback, which webhooks may reach only when the admin lists
    it: the tests list it, as a lab lists its internal chat server."""
    settings.NOTIFY_ALLOWED_TARGETS = ["127.0.0.1"]
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


class Silent:
    """A webhook that accepts connections and never answers: each stays open until the
    test ends. ``open`` counts those held now."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.held: list[socket.socket] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    @property
    def open(self) -> int:
        with self.lock:
            return len(self.held)

    def accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: the test is over
                return
            with self.lock:
                self.held.append(conn)

    def close(self):
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (Linux)
        self.listener.close()
        self.thread.join(timeout=5)
        with self.lock:
            for conn in self.held:
                conn.close()


@pytest.fixture
def silent(settings):
    """A hanging webhook on loopback, which the test's admin allows (as in ``receiver``)."""
    settings.NOTIFY_ALLOWED_TARGETS = ["127.0.0.1"]
    server = Silent()
    yield server
    server.close()
