"""The web server we ship (core.webserver), in a process forked from the tests, on the test
database: for tests that need real HTTP and websockets (the browser, fuzzing over the
network). pytest-django's live_server speaks WSGI only, and channels' daphne test process
runs daphne's own server, not ours with its bounds and compression."""

import asyncio
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from channels.testing.live import make_application
from daphne.testing import DaphneProcess
from django.db import connections
from twisted.internet import asyncioreactor

from monitoring.cluster import close_database_connections
from tests.realparts import require


class ShippedServerProcess(DaphneProcess):
    """daphne's test process, serving with ``core.webserver.BoundedServer``: its ``run`` as
    daphne's, with our server class."""

    def run(self) -> None:
        # In the forked child: a fresh asyncio reactor (the parent's is not this process's to
        # run), then daphne's server module and ours imported anew, so that they use it. The
        # parent may have imported both already, bound to its own reactor.
        for name in ("twisted.internet.reactor", "daphne.server", "core.webserver"):
            sys.modules.pop(name, None)
        loop = asyncio.new_event_loop()
        asyncioreactor.install(loop)
        asyncio.set_event_loop(loop)
        from daphne.endpoints import build_endpoint_description_strings
        from twisted.internet import reactor

        from core.webserver import BoundedServer

        try:
            endpoints = build_endpoint_description_strings(host=self.host, port=self.port.value)
            self.server = BoundedServer(
                application=self.get_application(),
                endpoints=endpoints,
                signal_handlers=False,
                **self.kwargs,
            )
            reactor.callLater(0.1, self.resolve_port)  # tells the parent the port when bound
            if self.setup is not None:
                self.setup()
            try:
                self.server.run()
            finally:
                if self.teardown is not None:
                    self.teardown()
        except BaseException as exc:  # to the parent, as daphne's test process reports it
            self.errors.put((exc, traceback.format_exc()))


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
