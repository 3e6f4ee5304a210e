"""Checks that a host is ready: SSH login, host key, and the tools the service runs there."""

from dataclasses import dataclass

from . import hostscripts
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
    # A finding that does not stop the host from working (e.g. no GPU: monitored CPU-only).
    warning: bool = False


# Constant script (monitoring/scripts/has-tool.sh); the tool name arrives as "$1".
HAS_TOOL = hostscripts.load("monitoring", "has-tool.sh")

# A host without nvidia-smi is a CPU-only host: monitored (CPU, RAM, disks) and usable for
# jobs without GPUs, so its absence is a warning, not a failure.
OPTIONAL = {"nvidia-smi": "no NVIDIA driver: monitored as a CPU-only host"}
TOOLS = {
    "nvidia-smi": "install the NVIDIA driver, if the host has NVIDIA GPUs",
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
    for check in checks:
        if not check.ok and check.name in OPTIONAL:
            check.warning, check.detail = True, OPTIONAL[check.name]
    return checks


def where(host: Host) -> str:
    """How the service reaches the host, as people read it."""
    if host.is_local:
        return "this machine, without SSH"
    return f"{host.username}@{host.address}:{host.port}"


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
    if host.is_local:
        return Check("commands", True, f"run here as {result.stdout.strip()}")
    return Check("login", True, f"logged in as {result.stdout.strip()}")


def _check_tool(host: Host, tool: str, fix: str) -> Check:
    try:
        result = pool.run(host, ["sh", "-c", HAS_TOOL, "sh", tool], timeout=10)
    except CommandMissing:
        return Check(tool, False, "not found", fix)
    except TransportError as exc:
        return Check(tool, False, str(exc))
    if result.exit_status != 0:
        return Check(tool, False, "not found on PATH", fix)
    return Check(tool, True, result.stdout.strip())
