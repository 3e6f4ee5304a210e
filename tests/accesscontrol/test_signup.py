"""Self-sign-up by proof of a UNIX account, against the real test sshd.

The sshd lets the service key into any account (one authorized_keys file for all). The
account running the tests is root or the service's own, which sign-up refuses, so the
person signing up is a real ordinary account (UID >= 1000) the tests create; the proof
file is written into its home, as that person would.
The request hands the proof to the workers and waits for their answer: a thread
stands in for them (so the tests' rows must be committed: transaction=True).
"""

import os
import pwd
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from accesscontrol import signup
from accesscontrol.models import HostAccount
from accesscontrol.services import profile_for
from accesscontrol.signup import PROOF_FILE, SignupRefused, prove_unix_account
from monitoring.inventory import probe_and_record
from monitoring.models import Host
from tests.monitoring.conftest import (  # noqa: F401  (fixtures)
    fake_gpu_root,
    gpus,
    make_host,
    sshd,
)
from tests.realparts import remove_unix_account, unix_account
from tests.workers import Workers

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/access/signup/"
User = get_user_model()
# Ordinary accounts created for these tests, named per test process: CI's two runs share the
# machine's accounts.
MEMBER = f"hive-signup-member-{os.getpid()}"


@pytest.fixture(scope="module")
def member(sshd):  # noqa: F811
    """A lab member's ordinary UNIX account (UID >= 1000), created as people's are."""
    account = unix_account(sshd, MEMBER)
    assert account.pw_uid >= 1000
    yield account
    remove_unix_account(MEMBER)


@pytest.fixture
def probed_host(db, sshd, gpus, settings):  # noqa: F811
    """A host behind the test sshd whose host key the monitoring probe has recorded."""
    settings.SELF_SIGNUP = True
    settings.SSH_CONNECT_TIMEOUT = 15  # a loaded CI machine answers slowly
    gpus("127.0.0.2").set_gpus([])
    host = make_host(sshd, "node-2", "127.0.0.2")
    probe_and_record(host)
    host.refresh_from_db()
    assert host.host_key, host.last_error
    return host


def proof_path(account) -> Path:
    return Path(account.pw_dir) / PROOF_FILE


def write_proof(account, text: str) -> None:
    """As the account's owner would: a file of theirs in their home."""
    path = proof_path(account)
    path.write_text(text + "\n")
    os.chown(path, account.pw_uid, account.pw_gid)


@pytest.fixture
def proof_file(member):
    """Writes into the member's proof file; the file is gone afterwards."""
    proof_path(member).unlink(missing_ok=True)
    yield lambda text: write_proof(member, text)
    proof_path(member).unlink(missing_ok=True)


def me_account():
    return pwd.getpwnam(MEMBER)


def code_on_the_page(client) -> str:
    page = client.get(URL).content.decode()
    return re.search(r"echo ([0-9a-f]{32}) &gt; ~/" + re.escape(PROOF_FILE), page)[1]


@pytest.fixture
def workers():
    with Workers():
        yield


def form(host, username=MEMBER, **extra) -> dict:
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
    user = User.objects.get(username=MEMBER)
    assert user.profile.unix_username_for(probed_host) == MEMBER
    assert HostAccount.objects.get(profile__user=user).proven_at is not None
    assert client.get("/access/week/").status_code == 200
    assert not proof_path(me_account()).exists()  # read once, then removed


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
    assert not User.objects.filter(username=MEMBER).exists()


def test_another_visitor_s_code_does_not_serve(client, probed_host, proof_file, workers):
    from django.test import Client

    proof_file(code_on_the_page(Client()))  # the code someone else's browser was shown
    code_on_the_page(client)
    assert client.post(URL, form(probed_host)).status_code == 400
    assert not User.objects.filter(username=MEMBER).exists()


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
        prove_unix_account(other, MEMBER, "0" * 32)
    assert proof_path(me_account()).exists()  # nothing was run there


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
    assert proof_path(me_account()).read_text().strip() == code  # never read: no login


def test_it_offers_only_hosts_with_a_recorded_key(db, settings, sshd):  # noqa: F811
    settings.SELF_SIGNUP = True
    unprobed = make_host(sshd, "node-3", "127.0.0.3")
    with pytest.raises(SignupRefused, match="host key is not recorded"):
        prove_unix_account(unprobed, MEMBER, "0" * 32)
    assert list(signup.signup_hosts()) == []


# --- accounts nobody may claim (issue 15) ---------------------------------------------------


@pytest.fixture(scope="module")
def system_account(sshd):  # noqa: F811
    """A system account (useradd -r: UID below 1000) with a home, a shell and the key, so
    the proof can be made: only its UID gives it away."""
    name = f"hive-signup-sys-{os.getpid()}"
    account = unix_account(sshd, name, "-r")
    assert account.pw_uid < 1000
    yield account
    remove_unix_account(name)


def test_root_cannot_sign_up_even_with_the_proof_in_its_home(client, probed_host):
    # The service key is in root's authorized_keys on every host (monitoring): whoever is
    # root on one host could write the code there and claim root everywhere.
    root = pwd.getpwnam("root")
    write_proof(root, code_on_the_page(client))
    try:
        response = client.post(URL, form(probed_host, username="root"))
        assert response.status_code == 400
        assert "root is never used to run jobs" in response.content.decode()
        assert proof_path(root).exists()  # refused before logging in
    finally:
        proof_path(root).unlink(missing_ok=True)
    assert not User.objects.filter(username="root").exists()


def test_a_system_account_cannot_sign_up(client, probed_host, system_account, workers):
    write_proof(system_account, code_on_the_page(client))
    response = client.post(URL, form(probed_host, username=system_account.pw_name))
    assert response.status_code == 400
    page = response.content.decode()
    assert f"has UID {system_account.pw_uid}, a system account" in page
    assert not User.objects.filter(username=system_account.pw_name).exists()


def test_the_monitoring_account_of_any_host_cannot_sign_up(client, probed_host, proof_file):
    Host.objects.create(name="gpu-9", address="10.9.9.9", username=MEMBER)
    proof_file(code_on_the_page(client))
    response = client.post(URL, form(probed_host))
    assert response.status_code == 400
    assert "is the monitoring account of a host" in response.content.decode()
    assert not User.objects.filter(username=MEMBER).exists()


def test_the_service_account_cannot_sign_up(client, probed_host, proof_file, monkeypatch):
    from accesscontrol import accounts

    monkeypatch.setattr(accounts, "service_account", lambda: MEMBER)
    proof_file(code_on_the_page(client))
    response = client.post(URL, form(probed_host))
    assert response.status_code == 400
    assert "own account (it holds the key to every host)" in response.content.decode()


def test_the_proof_counts_only_on_the_host_it_was_made_on(
    client,
    probed_host,
    proof_file,
    sshd,  # noqa: F811
    workers,
):
    other_host = make_host(sshd, "node-3", "127.0.0.3")
    proof_file(code_on_the_page(client))
    assert client.post(URL, form(probed_host)).status_code == 302
    profile = profile_for(User.objects.get(username=MEMBER))
    assert profile.unix_username == ""  # no account on every host
    assert profile.unix_username_for(probed_host) == MEMBER
    assert profile.unix_username_for(other_host) == ""


def test_a_name_someone_holds_on_that_host_is_refused(client, probed_host, proof_file, other_user):
    HostAccount.objects.create(
        profile=profile_for(other_user), host=probed_host, unix_username=MEMBER
    )
    proof_file(code_on_the_page(client))
    response = client.post(URL, form(probed_host))
    assert response.status_code == 400
    assert "already has a user here" in response.content.decode()
    assert proof_path(me_account()).exists()  # refused before logging in


def test_proofs_are_limited_per_address_and_name(
    client, probed_host, proof_file, settings, workers
):
    settings.SIGNUP_ATTEMPTS = 2
    code = code_on_the_page(client)
    for _ in range(2):
        proof_file("0" * 32)
        assert "did not hold the code" in client.post(URL, form(probed_host)).content.decode()
    proof_file(code)  # even the right code: no login this time
    response = client.post(URL, form(probed_host))
    assert response.status_code == 400
    assert "Too many sign-up attempts" in response.content.decode()
    assert proof_path(me_account()).read_text().strip() == code
    assert not User.objects.filter(username=MEMBER).exists()
    from django.test import Client

    elsewhere = Client(REMOTE_ADDR="10.7.7.7")  # another address, the same name: still limited
    code_on_the_page(elsewhere)
    assert "Too many sign-up attempts" in elsewhere.post(URL, form(probed_host)).content.decode()


def test_without_workers_the_page_says_so_in_bounded_time(probed_host, proof_file, settings):
    from django.test import Client

    settings.WORKER_ANSWER_SECONDS = 0.5
    client = Client()
    proof_file(code_on_the_page(client))  # no workers run: nobody takes the question
    response = client.post(URL, form(probed_host))
    assert response.status_code == 400
    assert "did not answer within 0.5 s" in response.content.decode()
    assert not User.objects.filter(username=MEMBER).exists()
