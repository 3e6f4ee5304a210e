"""The service's own SSH key pair, generated on first use into the data directory."""

import os
import socket
from pathlib import Path

from django.conf import settings


def service_key_path() -> Path:
    """Path of the private key, creating the key pair (mode 0600) if it does not exist."""
    path = Path(settings.SSH_KEY_PATH)
    if not path.exists():
        _generate(path)
    return path


def public_key_line() -> str:
    """The line users append to ~/.ssh/authorized_keys on each host."""
    path = service_key_path()
    return path.with_suffix(".pub").read_text().strip()


def _generate(path: Path) -> None:
    # Imported here: the key is made once per install, and cryptography is several MiB
    # that every process importing this module would otherwise hold.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    # O_EXCL: two processes starting at once must not both write (and one lose) a key.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as f:
        f.write(private)
    comment = f"gpuhive@{socket.gethostname()}"
    path.with_suffix(".pub").write_text(f"{public.decode()} {comment}\n")
