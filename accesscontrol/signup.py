"""Self-sign-up by proof of a UNIX account (off unless ``settings.SELF_SIGNUP``).

The user puts the service's public key in ``~/.ssh/authorized_keys`` on a host; we log in
there as them with our key and believe the account is theirs when ``id -un`` prints its name.
Only hosts whose host key was recorded by a probe qualify, and the key must match, so nobody
can answer in the host's place.
"""

from django.conf import settings

from monitoring.connections import ssh_target
from monitoring.models import Host
from monitoring.transport import SSHTransport, TransportError


class SignupRefused(Exception):
    """The account could not be proven; ``str()`` tells the user what to do."""


def self_signup_enabled() -> bool:
    return settings.SELF_SIGNUP


def signup_hosts():
    """Hosts a user may prove an account on: reached over SSH, probed (key known), enabled."""
    return Host.objects.filter(enabled=True, transport=Host.Transport.SSH).exclude(host_key="")


def prove_unix_account(host: Host, username: str) -> None:
    """Log in to ``host`` as ``username`` with the service key; raise SignupRefused if not."""
    if host.is_local or not host.host_key:
        raise SignupRefused(f"{host} cannot be used for sign-up: its host key is not recorded.")
    transport = SSHTransport(ssh_target(host, username))
    try:
        result = transport.run(["id", "-un"], timeout=settings.SSH_COMMAND_TIMEOUT)
    except TransportError as exc:
        raise SignupRefused(f"Could not log in to {host} as {username}: {exc}") from None
    finally:
        transport.close()
    if not result.ok or result.stdout.strip() != username:
        raise SignupRefused(f"Logged in to {host}, but the account did not say it is {username}.")
