"""Self-sign-up by proof of a UNIX account (off unless ``settings.SELF_SIGNUP``).

The user puts the service's public key in ``~/.ssh/authorized_keys`` on a host and writes
the one-time code the sign-up page shows into ``~/.gpuhive-signup``; we log in there as them
with our key and believe the account is theirs when ``id -un`` prints its name and the file
holds the code. The key alone proves nothing about the person: anyone could claim an
account whose owner authorised the key, while only the owner can write into its home.
The code belongs to the visitor's session and the file is removed once read. Only hosts
whose host key was recorded by a probe qualify, and the key must match, so nobody can
answer in the host's place.

The proof is worth the one host it was made on: the new user gets the account there (a
HostAccount), never on every host. The service key logs in as root (the usual monitoring
account) on every host, so whoever is root on one host could otherwise claim root
everywhere. Accounts that may never run jobs (accesscontrol.accounts: root, the monitoring
and service accounts, UIDs below RUN_AS_MIN_UID) cannot be claimed at all, nor a name
someone else already holds on that host.
"""

import hmac
import secrets

from django.conf import settings

from core import workers
from monitoring import hostscripts
from monitoring.connections import ssh_target
from monitoring.models import Host
from monitoring.transport import SSHTransport, TransportError

from .accounts import account_taken, refusal, uid_refusal


class SignupRefused(Exception):
    """The account could not be proven; ``str()`` tells the user what to do."""


def self_signup_enabled() -> bool:
    return settings.SELF_SIGNUP


def signup_hosts():
    """Hosts a user may prove an account on: reached over SSH, probed (key known), enabled."""
    return Host.objects.filter(enabled=True, transport=Host.Transport.SSH).exclude(host_key="")


PROOF_FILE = ".gpuhive-signup"  # in the account's home, where its ssh sessions start
# One round trip: who we are (name, UID), then the file, read once.
PROOF_SCRIPT = hostscripts.load("accesscontrol", "signup-proof.sh")


def new_code() -> str:
    return secrets.token_hex(16)


def check_claim(host: Host, username: str) -> None:
    """Refuse, before logging in anywhere, a name nobody may claim or somebody holds."""
    why = refusal(username)
    if why:
        raise SignupRefused(f"{username} cannot be used to sign up: {why}.")
    if account_taken(host, username):
        raise SignupRefused(f"The UNIX account {username} on {host} already has a user here.")


def check_uid(host: Host, username: str, uid: int) -> None:
    """System accounts (below RUN_AS_MIN_UID) are refused once the host has told the UID."""
    why = uid_refusal(f"{username} on {host}", uid)
    if why:
        raise SignupRefused(f"{why}: it cannot be used to sign up.")


def prove_unix_account(host: Host, username: str, code: str) -> int:
    """Have a worker log in to ``host`` as ``username`` and find ``code`` in its proof file;
    return the account's UID; raise SignupRefused if anything does not hold.

    The request waits for the worker's answer (at most WORKER_ANSWER_SECONDS) rather than
    answering "checking…" and finishing later: a sign-up is rare, its visitor waits for the
    account anyway, and the wait keeps the form's errors in place with no pending state to
    keep per visitor; a web thread is held for a bounded time, and no host is called from it.
    """
    if host.is_local or not host.host_key:
        raise SignupRefused(f"{host} cannot be used for sign-up: its host key is not recorded.")
    try:
        return workers.ask("accesscontrol.signup.check_proof", host.pk, username, code)
    except workers.NoAnswer as exc:
        raise SignupRefused(str(exc)) from None


def check_proof(host_id: int, username: str, code: str) -> dict:
    """The worker's side of ``prove_unix_account``: log in and read the proof file once."""
    host = signup_hosts().filter(pk=host_id).first()
    if host is None:
        return workers.refusal("That host cannot be used for sign-up any more.")
    try:
        uid = _prove(host, username, code)
    except SignupRefused as exc:
        return workers.refusal(str(exc))
    return workers.answer(uid)


def _prove(host: Host, username: str, code: str) -> int:
    transport = SSHTransport(ssh_target(host, username))
    try:
        result = transport.run(
            ["sh", "-c", PROOF_SCRIPT, "sh", PROOF_FILE], timeout=settings.SSH_COMMAND_TIMEOUT
        )
    except TransportError as exc:
        raise SignupRefused(f"Could not log in to {host} as {username}: {exc}") from None
    finally:
        transport.close()
    who, _, found = result.stdout.partition("@@\n")
    name, _, uid = who.strip().partition("\n")
    if name != username or not uid.isdigit():
        raise SignupRefused(f"Logged in to {host}, but the account did not say it is {username}.")
    if not result.ok or not hmac.compare_digest(found.strip(), code):
        raise SignupRefused(
            f"Logged in to {host} as {username}, but ~/{PROOF_FILE} did not hold the code "
            "shown on this page: write it there from that account, then try again."
        )
    return int(uid)
