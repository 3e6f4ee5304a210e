"""One transport per host, kept open between probes, with backoff after failures."""

import threading
import time
from dataclasses import dataclass

from django.conf import settings

from .keys import service_key_path
from .models import Host
from .transport import (
    AuthFailed,
    CommandResult,
    HostKey,
    HostKeyChanged,
    LocalTransport,
    SSHTarget,
    SSHTransport,
    Unreachable,
)

# Failures that mean "could not log in"; retried with growing pauses, not on every call.
CONNECT_ERRORS = (Unreachable, AuthFailed, HostKeyChanged)


@dataclass
class _Entry:
    signature: tuple
    transport: object
    failures: int = 0
    retry_at: float = 0.0
    last_error: Exception | None = None
    last_used: float = 0.0


def _signature(host: Host, host_key: str | None = None) -> tuple:
    key = host.host_key if host_key is None else host_key
    return (host.transport, host.address, host.port, host.username, key)


def ssh_target(host: Host, username: str | None = None) -> SSHTarget:
    """How to reach host over SSH with the service key, as its monitoring user or another.

    The recorded host key (if any) is required, so a host that changed key is refused.
    """
    known = (
        HostKey(host.host_key_type, host.host_key, host.host_key_fingerprint)
        if host.host_key
        else None
    )
    return SSHTarget(
        address=host.address,
        port=host.port,
        username=username or host.username,
        key_path=str(service_key_path()),
        known_host_key=known,
        connect_timeout=settings.SSH_CONNECT_TIMEOUT,
        keepalive=settings.SSH_KEEPALIVE,
    )


# Hosts reached neither over SSH nor locally: functions host -> transport, or None for a host
# that is not theirs, registered by apps at start (the demo lab's simulated hosts, in
# board.demolab). A registry, so that this layer needs to know none of them.
simulators: list = []


def _make_transport(host: Host):
    for simulate in simulators:
        if (transport := simulate(host)) is not None:
            return transport
    return LocalTransport() if host.is_local else SSHTransport(ssh_target(host))


class ConnectionPool:
    """Transports keyed by host; a host edited in the admin gets a fresh connection."""

    def __init__(self):
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.Lock()

    def _entry(self, host: Host) -> _Entry:
        self.close_idle()
        with self._lock:
            entry = self._entries.get(host.pk)
            if entry is None or entry.signature != _signature(host):
                if entry is not None:
                    entry.transport.close()
                entry = _Entry(_signature(host), _make_transport(host))
                self._entries[host.pk] = entry
            entry.last_used = time.monotonic()
            return entry

    def close_idle(self) -> int:
        """Close connections unused for SSH_IDLE_SECONDS (a host's sshd keeps a session
        and a process per connection); the next call opens a fresh one. Returns how many."""
        cutoff = time.monotonic() - settings.SSH_IDLE_SECONDS
        with self._lock:
            idle = [pk for pk, e in self._entries.items() if e.last_used < cutoff]
            for pk in idle:
                self._entries.pop(pk).transport.close()
        return len(idle)

    def __len__(self) -> int:
        return len(self._entries)

    def run(self, host: Host, argv, timeout=None, stdin=None, force=False) -> CommandResult:
        """Run argv on host. ``force`` skips the backoff pause (e.g. "probe now")."""
        timeout = timeout or settings.SSH_COMMAND_TIMEOUT
        return self._call(host, force, lambda t: t.run(argv, timeout=timeout, stdin=stdin))

    def start(self, host: Host, argv):
        """Start a long-running command on an SSH host; returns its paramiko channel."""
        return self._call(host, False, lambda t: t.start(argv))

    def _call(self, host: Host, force: bool, action):
        """action(transport), with the pauses after failures to log in."""
        entry = self._entry(host)
        if not force and entry.last_error is not None and time.monotonic() < entry.retry_at:
            wait = entry.retry_at - time.monotonic()
            raise type(entry.last_error)(f"{entry.last_error} (next attempt in {wait:.0f}s)")
        try:
            result = action(entry.transport)
        except CONNECT_ERRORS as exc:
            entry.failures += 1
            entry.last_error = exc
            entry.retry_at = time.monotonic() + min(2**entry.failures, settings.SSH_MAX_BACKOFF)
            raise
        entry.failures, entry.last_error = 0, None
        return result

    def same_connection(self, host: Host) -> bool:
        """Whether host's connection is still the one for its current settings."""
        entry = self._entries.get(host.pk)
        return entry is not None and entry.signature == _signature(host)

    def take_first_contact_key(self, host: Host) -> HostKey | None:
        """The host key accepted at first contact since the last call, if any.

        Connections are made in worker threads; the caller records the key in the database
        from its own thread.
        """
        entry = self._entries.get(host.pk)
        target = getattr(entry.transport, "target", None) if entry else None
        if target is None or target.first_contact_key is None:
            return None
        key, target.first_contact_key = target.first_contact_key, None
        # The recorded key is now part of the host; keep this connection for it.
        entry.signature = _signature(host, key.key_base64)
        return key

    def close(self, host_id: int | None = None) -> None:
        with self._lock:
            ids = [host_id] if host_id is not None else list(self._entries)
            for pk in ids:
                entry = self._entries.pop(pk, None)
                if entry:
                    entry.transport.close()


# The process-wide pool: workers and commands share connections within one process.
pool = ConnectionPool()
