"""The web server we ship (core.webserver), in a process forked from the tests, on the test
database: for tests that need real HTTP and websockets (the browser, fuzzing over the
network). pytest-django's live_server speaks WSGI only, and channels' daphne test process
runs daphne's own server, not ours with its bounds and compression."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from channels.testing.live import make_application
from daphne.testing import DaphneProcess
from django.db import connections

from monitoring.cluster import close_database_connections
from tests.realparts import require


class ShippedServerProcess(DaphneProcess):
    """daphne's test process, serving with ``core.webserver.BoundedServer``."""

    def run(self) -> None:
        import daphne.server

        from core.webserver import BoundedServer

        # In this forked child only: DaphneProcess.run builds the server daphne.server names.
        daphne.server.Server = BoundedServer
        super().run()


@contextmanager
def shipped_server(static_wrapper, setup: Callable[[], None]) -> Iterator[str]:
    """The server's URL while it runs; ``setup`` runs in its process before it serves (it
    must let the process use the database: pytest-django's guard is inherited)."""
    in_memory = any(c.vendor == "sqlite" and c.is_in_memory_db() for c in connections.all())
    require(not in_memory, "a separate server process cannot share an in-memory database")
    # A fork inherits the parent's open database sockets (PostgreSQL's pool keeps one open):
    # the server and the tests would then talk through one connection at once and read each
    # other's rows. Close them all first; each side then opens its own.
    close_database_connections()
    app = partial(make_application, static_wrapper=static_wrapper)
    server = ShippedServerProcess("127.0.0.1", app, setup=setup)
    server.start()
    try:
        if not server.ready.wait(timeout=30):
            raise RuntimeError("the web server did not start listening")
        yield f"http://127.0.0.1:{server.port.value}"
    finally:
        server.terminate()
        server.join(timeout=10)
