"""daphne with bounded requests: heads and bodies refused as they arrive, not once read.

daphne serves on Twisted's HTTP/1.1 channel, which takes in a whole request body (to memory
or a temporary file) before daphne hands any of it to the application, and then queues all of
it for the application at once: a 1 GB POST made daphne 1.2 GB large before the application's
own bound (core.limits) could answer. A header line over Twisted's 16 KiB closed the
connection without an answer; too many or too large headers got a bare 400.

Here the channel itself answers, with the API's error shape (``{"detail": ...}``):

- 413 as soon as the head declares a body over ``REQUEST_MAX_BODY_BYTES``, or as soon as a
  body without a length (chunked) passes it; nothing of it is kept;
- 414 for a request line, 431 for a header field, over ``REQUEST_MAX_HEADER_LINE_BYTES``;
  431 for a head over ``REQUEST_MAX_HEADER_BYTES`` or ``REQUEST_MAX_HEADERS`` fields;
- 408 when the head has not arrived within ``REQUEST_READ_TIMEOUT``; a connection that
  sends nothing for that long (mid-body, or idle between requests) is closed.

After such an answer the server closes its side of the connection but reads and drops
whatever the client still sends, for a few seconds at most: closed at once, with data unread,
the connection would be reset, and a client still sending could lose the answer (nginx's
"lingering close" does the same).

Websockets are compressed (permessage-deflate, RFC 7692) for clients that offer it, as every
browser does: daphne has no option for it, but autobahn, under it, has.

``python -m core.webserver`` takes daphne's options (``manage.py serve`` runs it, and
so does the systemd unit).
"""

import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server
from django.conf import settings
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IAddress, IDelayedCall, ITCPTransport
from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.web.http import HTTPChannel, Request

from core.limits import too_large_detail

# How long a refused client's further data is read and dropped before the connection closes.
LINGER_SECONDS = 5.0


@dataclass(frozen=True)
class Bounds:
    body: int
    line: int
    head: int
    fields: int
    read_timeout: float

    @classmethod
    def from_settings(cls) -> "Bounds":
        return cls(
            body=settings.REQUEST_MAX_BODY_BYTES,
            line=settings.REQUEST_MAX_HEADER_LINE_BYTES,
            head=settings.REQUEST_MAX_HEADER_BYTES,
            fields=settings.REQUEST_MAX_HEADERS,
            read_timeout=settings.REQUEST_READ_TIMEOUT,
        )


def answer(status: int, detail: str) -> bytes:
    """A whole HTTP/1.1 response that closes the connection."""
    body = json.dumps({"detail": detail}).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class BoundedChannel(HTTPChannel):
    """Twisted's HTTP/1.1 channel with the bounds above. Its own limits (``MAX_LENGTH``,
    ``totalHeadersSize``, ``maxHeaders``) are set to ours, which are checked first, so that
    the client gets an answer in words instead of a closed connection or a bare 400."""

    # daphne's -b/-p (the service's, deploy/systemd) listen over TCP; over a UNIX socket (-u)
    # the transport has the same methods, and its peer no port.
    transport: ITCPTransport | None
    bounds: Bounds
    refused = False  # answered already: whatever else arrives is dropped
    reading_head = True
    head_lines = 0
    head_bytes = 0
    request_line = b""
    head_deadline: IDelayedCall | None = None
    linger: IDelayedCall | None = None

    def connectionMade(self) -> None:
        self.bounds = self.factory.bounds
        self.MAX_LENGTH = self.bounds.line
        self.totalHeadersSize = self.bounds.head
        self.maxHeaders = self.bounds.fields
        super().connectionMade()

    def dataReceived(self, data: bytes) -> None:
        if self.refused:
            return
        if self.reading_head and self.head_deadline is None:
            self.head_deadline = self.callLater(self.bounds.read_timeout, self.head_too_slow)
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        if self.refused:  # the rest of a packet whose earlier line was refused
            return
        if line:  # blank lines end the head (or precede it): no field
            self.head_lines += 1
            self.head_bytes += len(line)  # as Twisted counts it: without the line ends
            self.request_line = self.request_line or line
        if self.head_bytes > self.bounds.head:
            self.refuse(431, f"The request head is larger than {self.bounds.head} bytes.")
        elif self.head_lines > self.bounds.fields + 1:  # the request line is no field
            self.refuse(431, f"The request has more than {self.bounds.fields} headers.")
        else:
            super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        limit = self.bounds.line
        if self.head_lines == 0:
            self.refuse(414, f"The request line is longer than {limit} bytes.")
        else:
            self.refuse(431, f"A request header is longer than {limit} bytes.")

    def allHeadersReceived(self) -> None:
        self.end_of_head()
        if self.length is not None and self.length > self.bounds.body:
            self.refuse(413, too_large_detail())  # before "100 Continue" is sent
        else:
            super().allHeadersReceived()

    def end_of_head(self) -> None:
        self.reading_head, self.head_lines, self.head_bytes = False, 0, 0
        if self.head_deadline is not None and self.head_deadline.active():
            self.head_deadline.cancel()
        self.head_deadline = None

    def requestDone(self, request: Request) -> None:
        # Before Twisted's: it goes on at once with a next request already received.
        self.reading_head, self.request_line = True, b""
        super().requestDone(request)

    def head_too_slow(self) -> None:
        self.head_deadline = None
        self.refuse(408, f"The request head did not arrive within {self.bounds.read_timeout} s.")

    def refuse(self, status: int, detail: str) -> None:
        """Answer, drop what follows for a while, then close (see the module's docstring)."""
        # A refusal comes while connected (on data, or from a timer that connectionLost
        # cancels), so there is a transport; without one there would be nobody to answer.
        if self.refused or self.transport is None:
            return
        self.refused = True
        self.end_of_head()
        response = answer(status, detail)
        self.transport.write(response)
        self.transport.loseWriteConnection()  # a client reading to the end has it all now
        self.setTimeout(None)  # the lingering has its own end
        self.linger = self.callLater(LINGER_SECONDS, self.loseConnection)
        self.log_refusal(status, len(response), self.transport.getPeer())

    def log_refusal(self, status: int, size: int, peer: IAddress) -> None:
        """An access-log line, as daphne writes one for every answered request."""
        method, _, rest = self.request_line.decode("latin-1").partition(" ")
        client: str | None = None  # a UNIX socket's peer has no port
        if isinstance(peer, IPv4Address | IPv6Address):
            client = f"{peer.host}:{peer.port}"
        path = rest.rpartition(" ")[0] or "-"
        details = {"path": path, "status": status, "method": method or "-", "client": client}
        details.update(size=size, time_taken=0.0)
        self.factory.server.log_action("http", "complete", details)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.end_of_head()
        if self.linger is not None and self.linger.active():
            self.linger.cancel()
        super().connectionLost(reason)


class BoundedRequest(WebRequest):
    """daphne's request, counting a body as it arrives: one without a declared length (the
    channel checks a declared one) is refused once it passes the bound, and never reaches
    the application.

    Form bodies are left to Django: by default Twisted parses them too (into ``args``, which
    daphne never reads) and answers a multipart body it cannot parse with a bare 400, no
    headers, no error shape. Its request's ``parsePOSTFormSubmission`` argument turns that
    off."""

    body_bytes = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    def handleContentChunk(self, data: bytes) -> None:
        if self.channel.refused:
            return
        self.body_bytes += len(data)
        if self.body_bytes > self.channel.bounds.body:
            self.channel.refuse(413, too_large_detail())
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if not self.channel.refused:
            super().requestReceived(command, path, version)


class BoundedHTTPFactory(HTTPFactory):
    """daphne's factory, building bounded channels (HTTP/1.1 only: daphne offers HTTP/2 only
    over TLS with the h2 package, neither of which the service uses)."""

    protocol = BoundedChannel

    def __init__(self, server: "BoundedServer") -> None:
        super().__init__(server)
        self.bounds = Bounds.from_settings()
        self.timeOut = self.bounds.read_timeout  # Twisted's idle timeout, reset by each read

    def buildProtocol(self, addr: IAddress) -> BoundedChannel:
        channel: BoundedChannel = super().buildProtocol(addr)
        channel.requestFactory = BoundedRequest
        return channel


def accept_deflate(offers: list) -> PerMessageDeflateOfferAccept | None:
    """Accept a client's permessage-deflate offer: the live board's JSON shrinks about 4x."""
    for offer in offers:
        if isinstance(offer, PerMessageDeflateOffer):
            return PerMessageDeflateOfferAccept(offer)
    return None


class BoundedServer(Server):
    """daphne's server, listening with ``BoundedHTTPFactory`` and compressing websockets.
    daphne builds its factories inside ``run`` and has no option for another or for
    compression, so the attributes it keeps them in swap in ours, or set the option, as
    they are set."""

    @property
    def http_factory(self) -> BoundedHTTPFactory:
        return self.bounded_factory

    @http_factory.setter
    def http_factory(self, _daphnes: object) -> None:
        self.bounded_factory = BoundedHTTPFactory(self)

    @property
    def ws_factory(self) -> Any:  # daphne's WebSocketFactory (daphne has no types)
        return self.deflating_factory

    @ws_factory.setter
    def ws_factory(self, daphnes: Any) -> None:
        # autobahn's WebSocketServerFactory option; daphne's later setProtocolOptions call
        # sets other options only.
        daphnes.setProtocolOptions(perMessageCompressionAccept=accept_deflate)
        self.deflating_factory = daphnes


class BoundedCommandLineInterface(CommandLineInterface):
    """``daphne``'s command line, running ``BoundedServer``."""

    server_class = BoundedServer


if __name__ == "__main__":
    BoundedCommandLineInterface.entrypoint()
