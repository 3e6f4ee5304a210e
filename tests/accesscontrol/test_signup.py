"""Self-sign-up by proof of a UNIX account, against the real test sshd.

The sshd lets the service key in as the account running the tests; the proof file is
written into that account's home, as the person signing up would. The request hands the
proof to the workers and waits for their answer: a thread stands in for them (so the
tests' rows must be committed: transaction=True).
"""

import os
import pwd
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from accesscontrol import signup
from accesscontrol.signup import PROOF_FILE, SignupRefused, prove_unix_account
from monitoring.inventory import probe_and_record
from monitoring.models import Host
from tests.monitoring.conftest import (  # noqa: F401  (fixtures)
    fake_gpu_root,
    gpus,
    make_host,
    sshd,
)
from tests.workers import Workers

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/access/signup/"
User = get_user_model()
ME = pwd.getpwuid(os.getuid())
PROOF = Path(ME.pw_dir) / PROOF_FILE


@pytest.fixture
def probed_host(db, sshd, gpus, settings):  # noqa: F811
    """A host behind the test sshd whose host key the monitoring probe has recorded."""
    settings.SELF_SIGNUP = True
    settings.SSH_CONNECT_TIMEOUT = 3
    gpus("127.0.0.2").set_gpus([])
    host = make_host(sshd, "node-2", "127.0.0.2")
    probe_and_record(host)
    host.refresh_from_db()
    assert host.host_key, host.last_error
    return host


@pytest.fixture
def proof_file():
    """Writes into the test account's proof file; the file is gone afterwards."""
    PROOF.unlink(missing_ok=True)
    yield lambda text: PROOF.write_text(text + "\n")
    PROOF.unlink(missing_ok=True)


def code_on_the_page(client) -> str:
    page = client.get(URL).content.decode()
    return re.search(r"echo ([0-9a-f]{32}) &gt; ~/" + re.escape(PROOF_FILE), page)[1]


@pytest.fixture
def workers():
    with Workers():
        yield


def form(host, username=ME.pw_name, **extra) -> dict:
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


def test_it_creates_the_account_when_the_home_holds_the_code(
    client, probed_host, proof_file, workers
):
    code = code_on_the_page(client)
    assert "ssh-ed25519" in client.get(URL).content.decode()  # the key to install
    assert code_on_the_page(client) == code  # the same code until it has served
    proof_file(code)
    response = client.post(URL, form(probed_host))
    assert response.status_code == 302 and response["Location"] == "/access/week/"
    user = User.objects.get(username=ME.pw_name)
    assert user.profile.unix_username_for(probed_host) == ME.pw_name
    assert client.get("/access/week/").status_code == 200
    assert not PROOF.exists()  # read once, then removed


@pytest.mark.parametrize("written", [None, "0" * 32, ""])
def test_the_authorised_key_alone_proves_nothing(client, probed_host, proof_file, workers, written):
    # Anyone could name an account whose owner put the service key in: without the code
    # in its home (only the owner can write there) no account is created.
    code_on_the_page(client)
    if written is not None:
        proof_file(written)
    response = client.post(URL, form(probed_host))
    assert response.status_code == 400
    assert f"~/{PROOF_FILE} did not hold the code" in response.content.decode()
    assert not User.objects.filter(username=ME.pw_name).exists()


def test_another_visitor_s_code_does_not_serve(client, probed_host, proof_file, workers):
    from django.test import Client

    proof_file(code_on_the_page(Client()))  # the code someone else's browser was shown
    code_on_the_page(client)
    assert client.post(URL, form(probed_host)).status_code == 400
    assert not User.objects.filter(username=ME.pw_name).exists()


def test_an_account_the_key_does_not_open_is_refused(client, probed_host, proof_file, workers):
    proof_file(code_on_the_page(client))
    response = client.post(URL, form(probed_host, username="nobody"))
    assert response.status_code == 400
    assert "Could not log in" in response.content.decode()
    assert not User.objects.filter(username="nobody").exists()


def test_a_host_answering_with_another_key_is_refused(probed_host, proof_file):
    other = Host.objects.get(pk=probed_host.pk)
    other.host_key = "AAAAC3NzaC1lZDI1NTE5AAAAIOxZXTe1aTOHXl8Dfx5xHxbsd+5R3uYlfPH2XJ1Mp0lC"
    other.save()
    proof_file("0" * 32)
    with pytest.raises(SignupRefused, match="Could not log in"):
        prove_unix_account(other, ME.pw_name, "0" * 32)
    assert PROOF.exists()  # nothing was run there


def test_it_checks_the_form_before_logging_in_anywhere(client, probed_host, proof_file, owner):
    code = code_on_the_page(client)
    proof_file(code)
    bad = [
        form(probed_host, username="Not A Unix Name"),
        form(probed_host, password2="something-else-7"),
        form(probed_host, username="owner"),  # taken
        {**form(probed_host), "host": 999999},
    ]
    for data in bad:
        assert client.post(URL, data).status_code == 400
    assert PROOF.read_text().strip() == code  # never read: no login happened


def test_it_offers_only_hosts_with_a_recorded_key(db, settings, sshd):  # noqa: F811
    settings.SELF_SIGNUP = True
    unprobed = make_host(sshd, "node-3", "127.0.0.3")
    with pytest.raises(SignupRefused, match="host key is not recorded"):
        prove_unix_account(unprobed, ME.pw_name, "0" * 32)
    assert list(signup.signup_hosts()) == []


def test_without_workers_the_page_says_so_in_bounded_time(probed_host, proof_file, settings):
    from django.test import Client

    settings.WORKER_ANSWER_SECONDS = 0.5
    client = Client()
    proof_file(code_on_the_page(client))  # no workers run: nobody takes the question
    response = client.post(URL, form(probed_host))
    assert response.status_code == 400
    assert "did not answer within 0.5 s" in response.content.decode()
    assert not User.objects.filter(username=ME.pw_name).exists()
