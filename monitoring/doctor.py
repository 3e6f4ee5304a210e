"""Checks that a host is ready: SSH login, host key, and the tools the service runs there."""

from dataclasses import dataclass

from .connections import pool
from .inventory import record_host_key
from .keys import public_key_line
from .models import Host
from .transport import AuthFailed, CommandMissing, HostKeyChanged, TransportError


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


# Constant script; the tool name arrives as "$1".
_HAS_TOOL = 'command -v "$1"'

TOOLS = {
    "nvidia-smi": "install the NVIDIA driver (without it the host is monitored as CPU-only)",
    "screen": "install GNU screen (e.g. `apt-get install screen`): jobs run inside it",
    "ps": "install procps (e.g. `apt-get install procps`)",
    "timeout": "install coreutils",
}


def check_host(host: Host) -> list[Check]:
    login = _check_login(host)
    checks = [login]
    if not login.ok:
        return checks
    if not host.is_local:
        new_key = pool.take_first_contact_key(host)
        if new_key:
            record_host_key(host, new_key)
        checks.append(Check("host key", True, f"{host.host_key_type} {host.host_key_fingerprint}"))
    checks += [_check_tool(host, tool, fix) for tool, fix in TOOLS.items()]
    return checks


def _check_login(host: Host) -> Check:
    try:
        result = pool.run(host, ["id", "-un"], timeout=10, force=True)
    except AuthFailed as exc:
        return Check("login", False, str(exc), f"append this line: {public_key_line()}")
    except HostKeyChanged as exc:
        return Check(
            "login",
            False,
            str(exc),
            "verify the new key with the host's admin, then use the admin action "
            "'Forget the recorded host key'",
        )
    except TransportError as exc:
        return Check("login", False, str(exc), "check the address, port and that sshd runs")
    return Check("login", True, f"logged in as {result.stdout.strip()}")


def _check_tool(host: Host, tool: str, fix: str) -> Check:
    try:
        result = pool.run(host, ["sh", "-c", _HAS_TOOL, "sh", tool], timeout=10)
    except CommandMissing:
        return Check(tool, False, "not found", fix)
    except TransportError as exc:
        return Check(tool, False, str(exc))
    if result.exit_status != 0:
        return Check(tool, False, "not found on PATH", fix)
    return Check(tool, True, result.stdout.strip())
