"""First-run set-up steps shared by `manage.py init` and the serve script."""

import os
import secrets
import socket
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model

from core.env import read_env_file

from .models import Host


def write_site_settings(public_url: str) -> Path:
    """Persist the public URL (and the host names it implies) in HIVE_DATA_DIR/hive.env."""
    parts = urlsplit(public_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {public_url!r}")
    hosts = sorted({parts.hostname, "localhost", "127.0.0.1"})
    origin = f"{parts.scheme}://{parts.netloc}"
    path = Path(settings.HIVE_DATA_DIR) / "hive.env"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        line
        for line in (path.read_text().splitlines() if path.exists() else [])
        if line.partition("=")[0] not in ("PUBLIC_URL", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS")
    ]
    lines += [
        f"PUBLIC_URL={public_url}",
        f"ALLOWED_HOSTS={','.join(hosts)}",
        f"CSRF_TRUSTED_ORIGINS={origin}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def configured_public_url() -> str:
    """PUBLIC_URL as the environment or hive.env sets it; "" while it is the built-in default."""
    if os.environ.get("PUBLIC_URL"):
        return os.environ["PUBLIC_URL"]
    return read_env_file(Path(settings.HIVE_DATA_DIR) / "hive.env").get("PUBLIC_URL", "")


def served_url(bind: str, port: int) -> str:
    """The URL of the address `serve` listens on: this machine's name when it listens on all
    addresses, localhost on the loopback one."""
    if bind in ("", "0.0.0.0", "::"):  # noqa: S104 (read, not bound)
        host = socket.getfqdn()
    elif bind in ("127.0.0.1", "::1", "localhost"):
        host = "localhost"
    else:
        host = bind
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"http://{host}" + ("" if port == 80 else f":{port}")


def create_first_admin(username: str, email: str, password: str | None) -> tuple[object, str]:
    """Create the first superuser; a password is generated when none is given."""
    password = password or secrets.token_urlsafe(12)
    user = get_user_model().objects.create_superuser(username, email, password)
    return user, password


def register_localhost() -> bool:
    """Register this machine as host `localhost`, probed without SSH. True if added."""
    _, created = Host.objects.get_or_create(
        name="localhost",
        defaults={"address": "localhost", "transport": Host.Transport.LOCAL},
    )
    return created
