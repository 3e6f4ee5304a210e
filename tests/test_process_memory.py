"""Memory by kind of process.

The web process and the supervisor (`serve`, `workers`) never open SSH, so paramiko and its
crypto stay out of them (monitoring.transport imports it when first used). Each of these runs
in a fresh interpreter with the service's own settings. The workers keep what they share
with the cluster shared (gc.freeze)."""

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django_q.signals import post_spawn

from monitoring.models import Host
from tests.faults.supervised import (
    Service,
    answers,
    fake_local_gpus,
    is_daphne,
    service,
    until,
)
from tests.realparts import children, free_port

ROOT = Path(__file__).resolve().parents[1]
SSH_MODULES = ("paramiko", "nacl", "invoke", "bcrypt")
DIRECTORY_MODULES = ("ldap", "django_auth_ldap", "mozilla_django_oidc", "jwt", "cryptography")

# The web process once it has answered: the ASGI application and every URL's view.
WEB = """
import django, json, sys
django.setup()
import hiveproject.asgi
from django.urls import get_resolver
def walk(patterns):
    for p in patterns:
        walk(p.url_patterns) if hasattr(p, "url_patterns") else p.callback
walk(get_resolver().url_patterns)
print(json.dumps(sorted(m for m in sys.modules if "." not in m)))
"""

SETUP_ONLY = """
import django, json, sys
django.setup()
print(json.dumps(sorted(m for m in sys.modules if "." not in m)))
"""


def top_modules(code: str, tmp_path, sqlite: bool = False) -> set[str]:
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "hiveproject.settings"}
    environ["HIVE_DATA_DIR"] = str(tmp_path)
    if sqlite:  # the embedded default, whatever database this test run uses
        environ.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_web_process_loads_no_ssh_library(tmp_path):
    loaded = top_modules(WEB, tmp_path)
    assert "rest_framework" in loaded and "django_q" in loaded  # the app itself was loaded
    assert loaded.isdisjoint(SSH_MODULES), loaded & set(SSH_MODULES)


def test_the_web_process_loads_no_directory_library_while_sign_in_with_one_is_off(tmp_path):
    """python-ldap, mozilla-django-oidc and their crypto: about 16 MiB (accesscontrol.signin)."""
    loaded = top_modules(WEB, tmp_path)
    assert "rest_framework" in loaded
    assert loaded.isdisjoint(DIRECTORY_MODULES), loaded & set(DIRECTORY_MODULES)


def test_the_web_process_on_sqlite_loads_no_postgresql_driver(tmp_path):
    """DRF would import django.contrib.postgres and psycopg with it (9 MiB): hiveproject.settings
    marks them missing where the database is not PostgreSQL."""
    loaded = top_modules(WEB, tmp_path, sqlite=True)
    assert "rest_framework" in loaded and "psycopg" not in loaded


def test_a_supervisor_loads_no_ssh_library(tmp_path):
    assert top_modules(SETUP_ONLY, tmp_path).isdisjoint(SSH_MODULES)


def maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.django_db(transaction=True)
def test_the_cluster_is_qcluster_and_its_supervisor_loads_no_ssh_library(tmp_path):
    """`manage.py workers` as run: the cluster is `manage.py qcluster`, a new interpreter in a
    group of its own, whose workers probe; the supervisor, whose first probe runs in a
    process of its own, maps none of paramiko's crypto."""
    Host.objects.create(name="localhost", address="localhost", transport=Host.Transport.LOCAL)
    gpu_root = tmp_path / "gpus"
    fake_local_gpus(gpu_root)
    workers = Service(["workers"], service(tmp_path / "data", gpu_root), tmp_path / "log")
    try:
        until(lambda: len(workers.workers()) == 3, 90, "three workers up", workers)
        until(
            lambda: Host.objects.filter(name="localhost", last_seen__isnull=False).exists(),
            30,
            "the first probe",
            workers,
        )
        supervisor, cluster = workers.proc.pid, workers.cluster_pid()
        assert b"qcluster" in Path(f"/proc/{cluster}/cmdline").read_bytes()
        assert "/nacl/_sodium" not in maps(supervisor)  # PyNaCl's library: paramiko loads it
    finally:
        workers.kill_all()


@pytest.mark.django_db(transaction=True)
def test_under_serve_the_web_process_is_the_bounded_server_and_loads_no_ssh_library(tmp_path):
    """`manage.py serve` as run: the web process is `python -m core.webserver` (as the
    systemd unit runs it), answers, and maps none of paramiko's crypto."""
    gpu_root = tmp_path / "gpus"
    fake_local_gpus(gpu_root)
    port = free_port()
    data = tmp_path / "data"
    serve = Service(["serve", "--port", str(port)], service(data, gpu_root), tmp_path / "log")
    login = f"http://127.0.0.1:{port}/accounts/login/"
    try:
        until(lambda: answers(login), 90, "the web app answers", serve)
        web = [pid for pid in children(serve.proc.pid) if is_daphne(pid)]
        assert len(web) == 1, web
        command = Path(f"/proc/{web[0]}/cmdline").read_bytes().split(b"\0")
        bind = [b"-b", b"127.0.0.1", b"-p", str(port).encode()]
        assert command[1:7] == [b"-m", b"core.webserver", *bind]
        assert "/nacl/_sodium" not in maps(web[0])
    finally:
        serve.kill_all()


def test_ssh_still_works_once_first_used(tmp_path):
    """The lazy import: the first SSH error names the problem as before."""
    from monitoring.transport import SSHTarget, SSHTransport, Unreachable
    from tests.realparts import free_port

    port = free_port()  # nothing listens there
    target = SSHTarget("127.0.0.1", port, "nobody", str(tmp_path / "no-key"), connect_timeout=2)
    with pytest.raises(Unreachable, match="connection refused"):
        SSHTransport(target).run(["true"], timeout=2)


def test_a_worker_freezes_what_it_inherited_from_the_cluster():
    """Sent by django-q2 in each worker once forked (monitoring.supervisor); frozen objects
    are left out of collections, so the pages shared with the cluster stay shared."""
    gc.unfreeze()
    try:
        post_spawn.send(sender="django_q", proc_name="Worker-test")
        assert gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()
