"""The service as a reverse proxy sees it: daphne in its own process, production settings."""

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from tests.realparts import free_port

ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """The test database as a DATABASE_URL, so a server process sees the test's rows."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = quote(db["USER"] or "") + (f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"


def service_env(data_dir: Path, **env) -> dict:
    """The environment of a service process: only what the test names, plus the test DB."""
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "HIVE_DATA_DIR")}
    return {**clean, "HIVE_DATA_DIR": str(data_dir), "DATABASE_URL": database_url(), **env}


class Daphne:
    """daphne serving hiveproject.asgi on a loopback port with the given environment."""

    def __init__(
        self, env: dict, collect_static: bool = True, options=None, port=None, command=None
    ):
        """``options``: daphne's own (``-b``, ``-p``...; the port is replaced by ``port`` or a
        free one), e.g. the shipped unit's; by default loopback only, nothing else.
        ``command``: the whole command line instead (on ``port``), e.g. a unit's ExecStart."""
        self.env, self.port = env, port or free_port()
        manage = [sys.executable, str(ROOT / "manage.py")]
        if collect_static:  # whitenoise serves collected files only (DEBUG off)
            subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], env=env, check=True)
        options = list(options or ["-b", "127.0.0.1", "-p", "8000"])
        options[options.index("-p") + 1] = str(self.port)
        argv = [sys.executable, "-m", "daphne", *options]
        # A file, not a pipe: a test that makes many requests would fill an unread pipe and
        # block daphne.
        self.log = Path(env["HIVE_DATA_DIR"]) / f"daphne-{self.port}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                command or [*argv, "hiveproject.asgi:application"],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self._wait_until_listening()

    def _wait_until_listening(self):
        import socket

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("daphne did not start listening")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


PUBLIC_HOST = "lab.example.org"


def behind_proxy_env(data_dir: Path, public_url: str, host: str) -> dict:
    """The production profile as deployed behind nginx at ``public_url``."""
    return service_env(
        data_dir, PUBLIC_URL=public_url, ALLOWED_HOSTS=host, HIVE_BEHIND_PROXY="1", DEBUG="0"
    )


def login_form_headers(host: str, login_path: str, csrf: str) -> dict:
    """What a browser sends with the sign-in form over https (CSRF checks Origin/Referer)."""
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "Cookie": f"csrftoken={csrf}",
        "Origin": f"https://{host}",
        "Referer": f"https://{host}{login_path}",
    }


@pytest.fixture(scope="module")
def proxied_site(django_db_setup, django_db_blocker, tmp_path_factory):
    """The production profile under https://lab.example.org/gpus/, behind a proxy."""
    env = behind_proxy_env(
        tmp_path_factory.mktemp("proxied-site"), f"https://{PUBLIC_HOST}/gpus", PUBLIC_HOST
    )
    with django_db_blocker.unblock():
        server = Daphne(env)
    yield server
    server.stop()
