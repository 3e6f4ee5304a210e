"""The local and the SSH transport fail the same way on the same input: one table, run over
both (the SSH one through the real test sshd)."""

import getpass
import re

import pytest
from django.core.exceptions import ValidationError

from accesscontrol.models import RunAsAllowance
from accesscontrol.services import ensure_default_group, profile_for
from jobs import services
from jobs.models import Task
from monitoring.connections import ssh_target
from monitoring.models import Host
from monitoring.transport import (
    MAX_COMMAND_BYTES,
    CommandMissing,
    CommandTimeout,
    CommandTooLong,
    LocalTransport,
    SSHTransport,
)

TOO_LONG = "x" * 200_000  # the 200 KB parameter that once gave a 500 on localhost
JUST_FITS = "y" * (MAX_COMMAND_BYTES - 20)
MISSING = "no-such-command-4711"

# (argv, stdin, timeout) -> the exception type and message, or the result's fields
CASES = [
    ([MISSING], None, 10, (CommandMissing, f"command not found: {MISSING}")),
    (["printf", TOO_LONG], None, 10, (CommandTooLong, "printf: the command line is 200007 bytes")),
    (["echo", "a\0b"], None, 10, (CommandTooLong, "echo: an argument holds a NUL byte")),
    (["sleep", "5"], None, 0.5, (CommandTimeout, "sleep did not finish within 0.5s")),
    (["sh", "-c", "echo out; echo err >&2; exit 3"], None, 10, (3, "out\n", "err\n")),
    (["cat"], "héllo\n", 10, (0, "héllo\n", "")),
    (["printf", "%s", JUST_FITS], None, 10, (0, JUST_FITS, "")),
]  # fmt: skip


@pytest.fixture(params=["local", "ssh"])
def transport(request, db, settings):
    if request.param == "local":
        yield LocalTransport()
        return
    sshd = request.getfixturevalue("sshd")
    settings.SSH_CONNECT_TIMEOUT = 3
    host = Host.objects.create(name="node-2", address="127.0.0.2", port=sshd.port,
                               username=getpass.getuser())  # fmt: skip
    ssh = SSHTransport(ssh_target(host))
    yield ssh
    ssh.close()


@pytest.mark.parametrize(("argv", "stdin", "timeout", "expected"), CASES)
def test_the_same_input_fails_the_same_way(transport, argv, stdin, timeout, expected):
    if isinstance(expected[0], type):
        kind, message = expected
        with pytest.raises(kind) as raised:
            transport.run(argv, timeout=timeout, stdin=stdin)
        assert str(raised.value).startswith(message)
        return
    result = transport.run(argv, timeout=timeout, stdin=stdin)
    assert (result.exit_status, result.stdout, result.stderr) == expected


@pytest.fixture(params=["local", "ssh"])
def any_host(request, db, settings, tmp_path):
    """A host of either transport on which tasks run as the current account."""
    settings.JOBS_LOG_DIR = str(tmp_path / "logs")
    if request.param == "local":
        return Host.objects.create(name="localhost", address="127.0.0.1",
                                   transport=Host.Transport.LOCAL)  # fmt: skip
    sshd = request.getfixturevalue("sshd")
    return Host.objects.create(name="node-2", address="127.0.0.2", port=sshd.port,
                               username=getpass.getuser())  # fmt: skip


def test_a_task_too_long_for_its_host_fails_with_why_on_either_transport(any_host, owner):
    profile = profile_for(owner)
    profile.unix_username = getpass.getuser()
    profile.save()
    # The tests' account (maybe root) is refused for jobs unless an admin allows it.
    RunAsAllowance.objects.create(
        unix_username=getpass.getuser(), host=any_host, reason="the tests run as this account"
    )
    ensure_default_group()
    spec = services.TaskSpec(host=any_host, template="echo {x}", parameters={"x": TOO_LONG})
    task = services.create_job(owner, name="long", specs=[spec]).tasks.get()
    with pytest.raises(ValidationError, match="could not start: .* the command line is"):
        services.spawn_task(task, owner)
    task.refresh_from_db()
    assert task.status == Task.Status.FAILED
    # (a local task may be run through setpriv, as its owner: the argv's first word)
    assert re.fullmatch(
        rf"{any_host.name}: \S+: the command line is \d+ bytes, over the 131072 bytes a host "
        r"accepts \(pass long values in a file instead\)",
        task.error,
    ), task.error
