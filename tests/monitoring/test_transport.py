"""The transports themselves: quoting, missing commands, timeouts, backoff."""

import pytest

from monitoring.connections import pool
from monitoring.models import Host
from monitoring.transport import CommandMissing, CommandTimeout, LocalTransport, Unreachable

HOSTILE = ["a b", "$(id)", "`id`", "'q'\"", "semi;colon", "new\nline", "*", "$HOME", "-n"]


def test_every_argument_arrives_as_one_literal_word_over_ssh(ssh_host):
    result = pool.run(ssh_host, ["printf", "%s\\0", *HOSTILE])
    assert result.stdout.split("\0")[:-1] == HOSTILE


def test_every_argument_arrives_as_one_literal_word_locally():
    result = LocalTransport().run(["printf", "%s\\0", *HOSTILE], timeout=5)
    assert result.stdout.split("\0")[:-1] == HOSTILE


def test_stdin_is_passed_through(ssh_host):
    assert pool.run(ssh_host, ["cat"], stdin="hello\n").stdout == "hello\n"


def test_a_missing_command_is_named(ssh_host):
    with pytest.raises(CommandMissing, match="command not found: no-such-tool"):
        pool.run(ssh_host, ["no-such-tool", "--x"])
    with pytest.raises(CommandMissing, match="command not found: no-such-tool"):
        LocalTransport().run(["no-such-tool"], timeout=5)


def test_a_hung_command_times_out_and_the_connection_stays_usable(ssh_host):
    with pytest.raises(CommandTimeout, match="did not finish within 0.5s"):
        pool.run(ssh_host, ["sleep", "30"], timeout=0.5)
    assert pool.run(ssh_host, ["echo", "still here"]).stdout == "still here\n"


def test_a_failing_host_is_retried_after_a_pause_not_on_every_call(db, settings):
    settings.SSH_CONNECT_TIMEOUT = 1
    host = Host.objects.create(name="gone", address="127.0.0.1", port=1)
    with pytest.raises(Unreachable, match="connection refused"):
        pool.run(host, ["true"])
    with pytest.raises(Unreachable, match="next attempt in"):
        pool.run(host, ["true"])
    with pytest.raises(Unreachable, match="connection refused$"):
        pool.run(host, ["true"], force=True)  # "probe now" does not wait
