"""The first admin's generated password, kept in a file too: printed once on the console, it
is easily lost among the service's output. The file is readable by the service's account only
(0600) and removed at that admin's first sign-in (in the browser, or `hive login`), when it
has served its purpose."""

import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_save
from django.dispatch import receiver

FILE_NAME = "first-admin-password"


def password_file() -> Path:
    return Path(settings.HIVE_DATA_DIR) / FILE_NAME


def write_password_file(username: str, password: str) -> Path:
    """Write the file afresh (an older one belonged to an admin of an earlier database)."""
    path = password_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    # Created with mode 0600 at once, so the password is never readable by others.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(
            f"user: {username}\npassword: {password}\n"
            f"# Removed when {username} first signs in; change the password then.\n"
        )
    return path


def _owner(path: Path) -> str | None:
    try:
        first = path.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return first.removeprefix("user: ") if first.startswith("user: ") else None


@receiver(user_logged_in, dispatch_uid="first-admin-password-file")
def _remove_at_first_sign_in(sender, request, user, **kwargs):
    _remove_if_owner(user)


# `hive login` signs in by trading the password for a token (no session, no user_logged_in).
@receiver(post_save, sender="apitokens.ApiToken", dispatch_uid="first-admin-password-token")
def _remove_at_first_token(sender, instance, created, **kwargs):
    if created:
        _remove_if_owner(instance.user)


def _remove_if_owner(user) -> None:
    path = password_file()
    if path.exists() and _owner(path) == user.get_username():
        path.unlink(missing_ok=True)
