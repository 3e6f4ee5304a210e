"""Running commands on hosts: over one persistent SSH connection per host, or locally.

Commands are always argument lists; they are joined with ``shlex.join`` so the remote
shell sees each argument as one literal word. Errors are one-line, per-host, and typed, so
callers can tell "unreachable" from "auth failed" from "host key changed".

paramiko is imported on the first SSH connection, not with this module: most apps import
this module for its errors, and paramiko with cryptography, nacl and invoke is about 30 MiB
that the web process, `serve` and `gpurun` on the local host never use.
"""

from __future__ import annotations

import logging
import select
import shlex
import socket
import subprocess
import threading
import time
from base64 import b64decode
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.hostcalls import refuse_in_request

if TYPE_CHECKING:
    import paramiko

log = logging.getLogger(__name__)

IDLE_WAKEUP_SECONDS = 1.0


class TransportError(Exception):
    """A problem reaching a host or running a command there; ``str()`` is one line."""

    status = "error"


class Unreachable(TransportError):
    status = "unreachable"


class AuthFailed(TransportError):
    status = "auth_failed"


class HostKeyChanged(TransportError):
    status = "host_key_changed"


class CommandTimeout(TransportError):
    pass


class CommandMissing(TransportError):
    pass


class CommandTooLong(TransportError):
    """The command cannot be passed to the host (an argument too long, or a NUL byte)."""


@dataclass
class CommandResult:
    argv: list[str]
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


@dataclass
class HostKey:
    key_type: str
    key_base64: str
    fingerprint: str

    @classmethod
    def from_paramiko(cls, key: paramiko.PKey) -> HostKey:
        return cls(key.get_name(), key.get_base64(), key.fingerprint)


@dataclass
class SSHTarget:
    """Where and how to connect; a plain value so the transport needs no database."""

    address: str
    port: int
    username: str
    key_path: str
    known_host_key: HostKey | None = None
    connect_timeout: float = 5.0
    keepalive: int = 15
    # The key accepted at first contact (trust on first use), for the caller to record.
    first_contact_key: HostKey | None = None


# Linux's MAX_ARG_STRLEN: the longest single argument execve() accepts. Over SSH the whole
# command line is one argument of the remote shell, so the joined line is what counts, and
# it is checked the same way for the local transport: the same input fails the same way.
MAX_COMMAND_BYTES = 128 * 1024 - 1


def check_command(argv: list[str]) -> str:
    """The shell line for argv, or CommandTooLong if no host could be given it."""
    if any("\0" in arg for arg in argv):
        raise CommandTooLong(f"{argv[0]}: an argument holds a NUL byte, which no command can take")
    line = shlex.join(argv)
    size = len(line.encode(errors="surrogateescape"))
    if size > MAX_COMMAND_BYTES:
        raise CommandTooLong(
            f"{argv[0]}: the command line is {size} bytes, over the {MAX_COMMAND_BYTES + 1} "
            "bytes a host accepts (pass long values in a file instead)"
        )
    return line


def _check_exit(argv, status: int, stderr: str) -> None:
    # 127 is what POSIX shells return when the command is not on PATH.
    if status == 127:
        raise CommandMissing(f"command not found: {argv[0]}")


class LocalTransport:
    """Runs commands on the machine the service runs on, without SSH."""

    def run(self, argv: list[str], timeout: float, stdin: str | None = None) -> CommandResult:
        refuse_in_request(argv)
        check_command(argv)
        try:
            proc = subprocess.run(
                argv, input=stdin, capture_output=True, text=True, timeout=timeout
            )
        except FileNotFoundError:
            raise CommandMissing(f"command not found: {argv[0]}") from None
        except subprocess.TimeoutExpired:
            raise CommandTimeout(f"{argv[0]} did not finish within {timeout:g}s") from None
        except OSError as exc:  # e.g. not executable: one line, like SSH's errors
            raise TransportError(f"{argv[0]} could not run: {exc.strerror or exc}") from None
        _check_exit(argv, proc.returncode, proc.stderr)
        return CommandResult(argv, proc.returncode, proc.stdout, proc.stderr)

    def close(self):
        pass


class _RecordingPolicy:
    """Trust on first use: accept an unknown key only when none was recorded before.
    (A paramiko MissingHostKeyPolicy by its method; paramiko asks for no base class.)"""

    def __init__(self, target: SSHTarget):
        self.target = target

    def missing_host_key(self, client, hostname, key):
        if self.target.known_host_key is not None:
            # A recorded key of another type than offered counts as a change, not a new host.
            raise HostKeyChanged(_changed_message(self.target.known_host_key, key))
        seen = HostKey.from_paramiko(key)
        self.target.known_host_key = self.target.first_contact_key = seen


def _changed_message(known: HostKey, key: paramiko.PKey) -> str:
    return (
        f"host key changed: expected {known.key_type} {known.fingerprint}, "
        f"got {key.get_name()} {key.fingerprint}; if the change is expected, "
        "forget the recorded key in the admin"
    )


class SSHTransport:
    """One persistent SSH connection to one host, reconnected on demand."""

    def __init__(self, target: SSHTarget):
        self.target = target
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    def _known_hosts_name(self) -> str:
        t = self.target
        return t.address if t.port == 22 else f"[{t.address}]:{t.port}"

    def _connect(self) -> paramiko.SSHClient:
        import paramiko

        t = self.target
        client = paramiko.SSHClient()
        if t.known_host_key:
            key = paramiko.PKey.from_type_string(
                t.known_host_key.key_type, b64decode(t.known_host_key.key_base64)
            )
            client.get_host_keys().add(self._known_hosts_name(), key.get_name(), key)
        client.set_missing_host_key_policy(_RecordingPolicy(t))
        try:
            client.connect(
                t.address,
                port=t.port,
                username=t.username,
                key_filename=t.key_path,
                timeout=t.connect_timeout,
                banner_timeout=t.connect_timeout,
                auth_timeout=t.connect_timeout,
                channel_timeout=t.connect_timeout,
                allow_agent=False,
                look_for_keys=False,
            )
        except TransportError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyChanged(_changed_message(t.known_host_key, exc.key)) from None
        except paramiko.AuthenticationException:
            client.close()
            raise AuthFailed(
                f"authentication as {t.username!r} failed: is the service key "
                "(manage.py sshkey) in that account's ~/.ssh/authorized_keys?"
            ) from None
        except socket.gaierror:
            client.close()
            raise Unreachable(f"unknown host name {t.address!r}") from None
        except channel_errors() as exc:
            client.close()
            raise Unreachable(f"cannot connect to {t.address}:{t.port}: {_reason(exc)}") from None
        transport = client.get_transport()
        transport.set_keepalive(t.keepalive)
        # paramiko's reader thread wakes every 0.1 s to see whether it should stop: with
        # hundreds of idle connections that is thousands of wake-ups a second. Once a
        # second still sends keepalives on time; a closed connection's thread ends within
        # it (close() does not wait for it).
        transport.sock.settimeout(IDLE_WAKEUP_SECONDS)
        return client

    def _connected_client(self) -> paramiko.SSHClient:
        transport = self._client.get_transport() if self._client else None
        if transport is None or not transport.is_active():
            self.close()
            self._client = self._connect()
        return self._client

    def _open_channel(self) -> paramiko.Channel:
        with self._lock:
            client = self._connected_client()
            try:
                return client.get_transport().open_session(timeout=self.target.connect_timeout)
            except channel_errors() as exc:
                self.close()
                raise Unreachable(
                    f"connection to {self.target.address} lost: {_reason(exc)}"
                ) from None

    def start(self, argv: list[str]) -> paramiko.Channel:
        """Start a long-running command; the caller talks to it over the returned channel
        (its stdin and stdout) and closes it."""
        refuse_in_request(argv)
        line = check_command(argv)
        chan = self._open_channel()
        try:
            chan.exec_command(line)
        except channel_errors() as exc:
            chan.close()
            self.close()
            raise Unreachable(f"connection to {self.target.address} lost: {_reason(exc)}") from None
        return chan

    def run(self, argv: list[str], timeout: float, stdin: str | None = None) -> CommandResult:
        refuse_in_request(argv)
        line = check_command(argv)
        chan = self._open_channel()
        try:
            chan.exec_command(line)
            if stdin is not None:
                chan.sendall(stdin.encode())
            chan.shutdown_write()
            out, err = _drain(chan, time.monotonic() + timeout)
        except CommandTimeout:
            chan.close()
            raise CommandTimeout(f"{argv[0]} did not finish within {timeout:g}s") from None
        except channel_errors() as exc:
            chan.close()
            self.close()
            raise Unreachable(f"connection to {self.target.address} lost: {_reason(exc)}") from None
        status = chan.recv_exit_status()
        chan.close()
        _check_exit(argv, status, err)
        return CommandResult(argv, status, out, err)

    def close(self):
        if self._client is not None:
            self._client.close()
            self._client = None


def channel_errors() -> tuple[type[BaseException], ...]:
    """What a connection or its channels raise when the connection is gone. A function, so
    that paramiko is imported only once it is used (an except clause evaluates it only when
    an exception reaches it)."""
    import paramiko

    return (OSError, paramiko.SSHException, EOFError)


def wait_readable(chan: paramiko.Channel, timeout: float) -> None:
    """Wait until chan has something to read or ended, at most timeout seconds. poll, not
    select: select cannot watch a descriptor numbered 1024 or more, and a loop probing
    hundreds of hosts holds more descriptors than that."""
    poller = select.poll()
    poller.register(chan.fileno(), select.POLLIN)
    poller.poll(max(0, int(timeout * 1000)))


def _drain(chan: paramiko.Channel, deadline: float) -> tuple[str, str]:
    """Read stdout and stderr until the command exits, or raise at the deadline."""
    out, err = bytearray(), bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CommandTimeout()
        wait_readable(chan, min(remaining, 0.5))
        while chan.recv_ready():
            out += chan.recv(65536)
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
        if chan.exit_status_ready() and chan.eof_received:
            if not (chan.recv_ready() or chan.recv_stderr_ready()):
                return out.decode(errors="replace"), err.decode(errors="replace")
        elif chan.closed:
            raise EOFError("channel closed before the command finished")


# What paramiko says when a port accepts TCP but no SSH server answers in time.
_NO_SSH_ANSWER = {"No existing session", "Error reading SSH protocol banner"}


def _reason(exc: BaseException) -> str:
    import paramiko

    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        # paramiko tried each resolved address; report the first underlying failure
        exc = next(iter(exc.errors.values()), exc)
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == 111:
        return "connection refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, paramiko.SSHException) and str(exc) in _NO_SSH_ANSWER:
        return "timed out waiting for the SSH server to answer"
    return str(exc) or type(exc).__name__
