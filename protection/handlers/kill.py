"""Kill the intruding process: SIGTERM, then SIGKILL after a grace period. Opt-in.

Signals are sent over SSH as the offender (when the service key is authorised for their
account, they may signal their own processes), else with a configured privileged command
run as the monitoring account, e.g. ``["sudo", "-n", "kill", "-s", "{signal}", "{pid}"]``
(each element one argument; ``{signal}``, ``{pid}`` and ``{user}`` are filled in). Every
kill is written to the audit log.
"""

import time

from django.conf import settings

from audit.log import record
from monitoring.connections import pool, ssh_target
from monitoring.transport import SSHTransport, TransportError

from ..models import Violation
from . import Handler, Skip


class KillHandler(Handler):
    """Options: ``grace_seconds`` (10), ``method`` ("auto": SSH as the offender, then the
    privileged command; "ssh"; "privileged"), ``privileged_command`` (argv template)."""

    def __init__(self, name="", grace_seconds=10, method="auto", privileged_command=None):
        super().__init__(name)
        if method not in ("auto", "ssh", "privileged"):
            raise ValueError(f"kill method must be auto, ssh or privileged, not {method!r}")
        if privileged_command is not None and not (
            isinstance(privileged_command, list)
            and all(isinstance(a, str) for a in privileged_command)
        ):
            raise ValueError("privileged_command must be a list of strings (an argv template)")
        if method == "privileged" and not privileged_command:
            raise ValueError("method 'privileged' needs a privileged_command")
        self.grace = float(grace_seconds)
        self.method = method
        self.privileged_command = privileged_command or []

    def handle(self, violation: Violation) -> str:
        if not violation.offender_unix:
            raise Skip("owner unknown: not killed (we never guess whose process it is)")
        state = self.state(violation)
        if state is None:
            raise Skip(f"process {violation.pid} had already ended")
        if state != violation.offender_unix:
            raise Skip(_not_theirs(violation, state))
        via = self.signal(violation, "TERM")
        signal = "TERM"
        if not self.wait_gone(violation, self.grace):
            via, signal = self.signal(violation, "KILL"), "KILL"
            if not self.wait_gone(violation, 5):
                raise RuntimeError(f"process {violation.pid} survived SIGKILL")
        self.audit(violation, signal, via)
        return f"killed pid {violation.pid} with SIG{signal} ({via})"

    def state(self, violation: Violation) -> str | None:
        """The process's owner now; None when it is gone (a zombie counts as gone)."""
        argv = ["ps", "-o", "stat=,user:64=", "-p", str(violation.pid)]
        result = pool.run(violation.device.host, argv)
        fields = result.stdout.split()
        if not result.ok or len(fields) < 2 or fields[0].startswith("Z"):
            return None
        return fields[1]

    def wait_gone(self, violation: Violation, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            if self.state(violation) is None:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def signal(self, violation: Violation, signal: str) -> str:
        """Send the signal by the first method that works; says which. Raises if none did."""
        failures = []
        if self.method in ("auto", "ssh") and not violation.device.host.is_local:
            try:
                return self.signal_as_offender(violation, signal)
            except (TransportError, RuntimeError) as exc:
                failures.append(f"as {violation.offender_unix} over SSH: {exc}")
        if self.method in ("auto", "privileged") and self.privileged_command:
            try:
                return self.signal_privileged(violation, signal)
            except (TransportError, RuntimeError) as exc:
                failures.append(f"privileged command: {exc}")
        raise RuntimeError("; ".join(failures) or "no way to send signals is configured")

    def signal_as_offender(self, violation: Violation, signal: str) -> str:
        host, user = violation.device.host, violation.offender_unix
        transport = SSHTransport(ssh_target(host, username=user))
        try:
            argv = ["kill", "-s", signal, str(violation.pid)]
            result = transport.run(argv, timeout=settings.SSH_COMMAND_TIMEOUT)
        finally:
            transport.close()
        if not result.ok:  # e.g. a nologin shell: "This account is currently not available."
            raise RuntimeError(_first_line(result) or f"kill exited {result.exit_status}")
        return f"over SSH as {user}"

    def signal_privileged(self, violation: Violation, signal: str) -> str:
        values = {
            "{signal}": signal,
            "{pid}": str(violation.pid),
            "{user}": violation.offender_unix,
        }
        argv = [values.get(part, part) for part in self.privileged_command]
        result = pool.run(violation.device.host, argv)
        if not result.ok:
            raise RuntimeError(_first_line(result) or f"{argv[0]} exited {result.exit_status}")
        return f"with {argv[0]} as {violation.device.host.username}"

    def audit(self, violation: Violation, signal: str, via: str) -> None:
        record(
            "process.killed",
            target=violation,
            host=violation.device.host.name,
            device=violation.device.index,
            pid=violation.pid,
            offender=violation.offender_unix,
            command=violation.command[:500],
            reservation=violation.reservation_id,
            signal=f"SIG{signal}",
            via=via,
        )


def _not_theirs(violation: Violation, account: str) -> str:
    """Why a process running as ``account`` is not killed as the offender's."""
    if violation.container_id:  # its owner came from the container's label, not from ps
        return (
            f"PID {violation.pid} runs as {account} in {violation.offender_name}: not killed "
            "(its account is not its owner's; stop the container)"
        )
    return f"PID {violation.pid} now belongs to {account}: not killed"


def _first_line(result) -> str:
    text = (result.stderr or result.stdout).strip()
    return text.splitlines()[0] if text else ""
