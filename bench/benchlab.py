"""What several benchmarks set up the same way. Import after ``django.setup()``: the scripts
run as ``python bench/NAME.py``, so this folder is on the path."""

import getpass

from django.contrib.auth import get_user_model

from accesscontrol.services import ensure_default_group, profile_for
from monitoring.models import Host


def user_and_ssh_host(sshd):
    """A user "bench" mapped to this UNIX account, in the default group, and host "bench"
    reached through the test sshd as this account."""
    user = get_user_model().objects.create_user("bench")
    profile = profile_for(user)
    profile.unix_username = getpass.getuser()
    profile.save()
    ensure_default_group()
    host = Host.objects.create(
        name="bench", address="127.0.0.2", port=sshd.port, username=getpass.getuser()
    )
    return user, host
