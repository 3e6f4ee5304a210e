"""Self-sign-up by proof of a UNIX account, at the unit level (the transport is replaced)."""

import pytest
from django.contrib.auth import get_user_model

from accesscontrol import signup
from accesscontrol.signup import SignupRefused, prove_unix_account
from monitoring.transport import AuthFailed, CommandResult, HostKeyChanged

URL = "/access/signup/"
User = get_user_model()


@pytest.fixture
def probed_host(node1):
    node1.host_key_type, node1.host_key = "ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAIExample"
    node1.host_key_fingerprint = "SHA256:example"
    node1.save()
    return node1


class FakeTransport:
    """Stands in for SSHTransport: records the target, answers or fails as told."""

    targets = []
    answer: object = None

    def __init__(self, target):
        self.targets.append(target)

    def run(self, argv, timeout, stdin=None):
        if isinstance(self.answer, Exception):
            raise self.answer
        return CommandResult(argv, 0, self.answer, "")

    def close(self):
        pass


@pytest.fixture
def transport(monkeypatch, settings):
    settings.SELF_SIGNUP = True
    FakeTransport.targets = []
    monkeypatch.setattr(signup, "SSHTransport", FakeTransport)
    return FakeTransport


def form(host, username="alice", **extra) -> dict:
    return {
        "host": host.pk,
        "username": username,
        "email": f"{username}@example.org",
        "password1": "a-long-pass-phrase-7",
        "password2": "a-long-pass-phrase-7",
        **extra,
    }


def test_it_is_off_unless_enabled(client, db):
    assert client.get(URL).status_code == 404


def test_it_logs_in_with_the_recorded_host_key_only(transport, probed_host):
    transport.answer = "alice\n"
    prove_unix_account(probed_host, "alice")
    [target] = transport.targets
    assert target.username == "alice" and target.address == probed_host.address
    assert target.known_host_key.key_base64 == probed_host.host_key


@pytest.mark.parametrize(
    ("failure", "words"),
    [
        (AuthFailed("authentication as 'alice' failed"), "Could not log in"),
        (HostKeyChanged("host key changed"), "host key changed"),
        ("mallory\n", "did not say it is alice"),
    ],
)
def test_it_refuses_when_the_login_does_not_prove_the_account(
    client, transport, probed_host, failure, words
):
    transport.answer = failure
    response = client.post(URL, form(probed_host))
    assert response.status_code == 400
    assert words in response.content.decode()
    assert not User.objects.filter(username="alice").exists()


def test_it_creates_the_account_and_signs_in(client, transport, probed_host):
    transport.answer = "alice\n"
    assert "ssh-ed25519" in client.get(URL).content.decode()  # the key to install
    response = client.post(URL, form(probed_host))
    assert response.status_code == 302 and response["Location"] == "/access/week/"
    alice = User.objects.get(username="alice")
    assert alice.profile.unix_username_for(probed_host) == "alice"
    assert client.get("/access/week/").status_code == 200


def test_it_checks_the_form_before_logging_in_anywhere(client, transport, probed_host, owner):
    bad = [
        form(probed_host, username="Not A Unix Name"),
        form(probed_host, password2="something-else-7"),
        form(probed_host, username="owner"),  # taken
        {**form(probed_host), "host": 999999},
    ]
    for data in bad:
        assert client.post(URL, data).status_code == 400
    assert transport.targets == []


def test_it_offers_only_hosts_with_a_recorded_key(transport, node1, node2):
    with pytest.raises(SignupRefused, match="host key is not recorded"):
        prove_unix_account(node2, "alice")
    assert list(signup.signup_hosts()) == []
