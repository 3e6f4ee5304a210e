"""One webhook call: to the address that was checked, never to one the name resolves to a
moment later (DNS rebinding), within short timeouts, without following redirects or proxies.

The name is resolved once (notifications.targets), every address checked, and the request
sent to that address with the name in the Host header and, over https, in TLS's SNI and the
certificate check (httpx's documented ``sni_hostname`` request extension).

What the channel's owner reads about a failure says what failed in words. It never tells a
refused connection from a timeout: that difference is what a port scan looks for. For
targets on the public internet it names the HTTP status a webhook answered (the owner could
learn it from their own machine anyway); for internal targets the admin allowed it says
only that the message was not delivered. The server's log has the details.
"""

import httpx
from django.conf import settings

from .targets import Target, TargetRefused, Undelivered, check_url

UNREACHABLE = "The webhook could not be reached, or did not answer in time."
UNDELIVERED = "The webhook could not be delivered (the server's log has the details)."


def post(url: str, body: dict) -> None:
    try:
        target = check_url(url)
    except TargetRefused as exc:
        raise Undelivered(f"Not sent: {exc}") from exc
    try:
        status = send(target, body)
    except httpx.HTTPError as exc:
        raise Undelivered(told(target, UNREACHABLE)) from exc
    if not 200 <= status < 300:  # redirects are not followed: a 3xx is a failure too
        answer = OSError(f"HTTP {status} from the webhook")
        raise Undelivered(told(target, f"The webhook answered HTTP {status}.")) from answer


def send(target: Target, body: dict) -> int:
    """POST ``body`` to the checked address; the answer's status (its body is not read)."""
    url = httpx.URL(target.url)
    name = url.raw_host.decode("ascii")
    host_header = f"[{name}]" if ":" in name else name
    if url.port is not None:
        host_header += f":{url.port}"
    timeout = httpx.Timeout(settings.NOTIFY_SEND_TIMEOUT, connect=settings.NOTIFY_CONNECT_TIMEOUT)
    with httpx.Client(timeout=timeout, trust_env=False, follow_redirects=False) as client:
        with client.stream(
            "POST",
            url.copy_with(host=str(target.address)),
            json=body,
            headers={"Host": host_header, "User-Agent": "gpuhive-notifications"},
            extensions={"sni_hostname": name} if url.scheme == "https" else {},
        ) as response:
            return response.status_code


def told(target: Target, words: str) -> str:
    """The owner's words for a failure: in full for a public target, without detail for an
    internal one (a network the admin opened must not be mapped through its webhooks)."""
    return words if target.address.is_global else UNDELIVERED
