"""Where webhooks may go: the one rule, checked when a channel is saved and again when a
delivery connects (a name may resolve elsewhere by then: DNS rebinding).

A target is an http(s) URL without credentials whose host resolves only to addresses that
are public and not this service's own. Loopback, link-local (169.254.169.254, the clouds'
metadata service), private (RFC 1918, fc00::/7), shared and reserved addresses are refused
unless the admin lists them in NOTIFY_ALLOWED_TARGETS (host names or networks: labs run
Mattermost or Matrix on internal networks); unspecified and multicast addresses never pass.

Refusals say what failed in words, never which port answered how: a refusal must not turn
the workers into a port scanner of the lab.
"""

import ipaddress
import socket
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
REFUSED = (
    "This address is inside the lab or the service itself (loopback, link-local, private or "
    "this server's own): webhooks may go there only if the admin allows it."
)


class TargetRefused(ValueError):
    """A webhook target that the rule refuses; the message is fit for its owner."""


class Undelivered(Exception):
    """A webhook call that failed; the message is fit for the channel's owner."""


@dataclass(frozen=True)
class Target:
    """A checked target: connect to ``address``, speaking to ``host`` (Host header, SNI)."""

    url: str
    host: str
    address: Address


def check_url(url: str, *, unresolved_ok: bool = False) -> Target | None:
    """The whole rule: the URL's form, then every address its host resolves to.

    ``unresolved_ok`` (when a channel is saved): a name that cannot be found passes, as
    None; every delivery checks again, and refuses it if it still cannot be found."""
    parts = split(url)
    host = parts.hostname
    try:
        addresses = resolve(host, parts.port or (443 if parts.scheme == "https" else 80))
    except TargetRefused:
        if unresolved_ok:
            return None
        raise
    for address in addresses:
        if not allowed(host, address):
            raise TargetRefused(REFUSED)
    return Target(url=url, host=host, address=addresses[0])


def split(url: str):
    """The URL's parts, if its form is one a webhook may have."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetRefused("Enter the webhook's http:// or https:// URL.")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("A webhook URL may not contain a user name or password.")
    try:
        parts.port  # noqa: B018 -- raises for a port that is not a number in range
    except ValueError:
        raise TargetRefused("The webhook URL's port is not a valid number.") from None
    return parts


def resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` stands for (any spelling of a number, e.g. 2130706433 or
    0x7f.1, comes out as the address it means)."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):  # loopback, always (RFC 6761)
        host = "localhost"
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise TargetRefused("The webhook's host name could not be found.") from None
    addresses = []
    for *_, sockaddr in found:
        address = plain(ipaddress.ip_address(sockaddr[0].partition("%")[0]))
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise TargetRefused("The webhook's host name could not be found.")
    return addresses


def plain(address: Address) -> Address:
    """An IPv4 address written as IPv6 (::ffff:127.0.0.1) is the IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def allowed(host: str, address: Address) -> bool:
    if address.is_unspecified or address.is_multicast:
        return False
    if listed(host, address):
        return True
    return address.is_global and address not in own_addresses()


def listed(host: str, address: Address) -> bool:
    """Allowed by the admin: the host by name, or an address in a listed network. A network
    opens the service's own addresses only when it is that single address."""
    names, networks = allow_list()
    if host.lower().rstrip(".") in names:
        return True
    own = address in own_addresses()
    return any(
        address in net and (not own or net.num_addresses == 1)
        for net in networks
        if net.version == address.version
    )


def allow_list() -> tuple[set[str], list]:
    names, networks = set(), []
    for entry in settings.NOTIFY_ALLOWED_TARGETS:
        entry = entry.strip().strip("[]")
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return names, networks


@lru_cache(maxsize=1)
def own_addresses() -> frozenset[Address]:
    """The addresses this machine answers on (its interfaces, read from /proc on Linux),
    its host name's and PUBLIC_URL's. Read once per process."""
    found = set(interface_addresses())
    for name in (socket.gethostname(), socket.getfqdn(), urlsplit(settings.PUBLIC_URL).hostname):
        try:
            found.update(resolve(name, 80) if name else ())
        except TargetRefused:
            continue
    return frozenset(found)


def interface_addresses() -> list[Address]:
    """Local IPv4 addresses (the kernel's LOCAL routes) and IPv6 interface addresses."""
    found = []
    try:
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
    except OSError:
        lines = []
    for previous, line in zip(lines, lines[1:], strict=False):
        if line.strip() == "/32 host LOCAL" and "|--" in previous:
            found.append(ipaddress.ip_address(previous.split("|--")[1].strip()))
    try:
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            found.append(ipaddress.IPv6Address(int(line.split()[0], 16)))
    except (OSError, ValueError, IndexError):
        pass
    return found
