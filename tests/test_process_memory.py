"""Memory by kind of process.

The web process and the supervisor (`serve`, `workers`) never open SSH, so paramiko and its
crypto stay out of them (monitoring.transport imports it when first used); the supervised
worker cluster loads it before its workers fork, so they share one copy. Each of these runs
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

from monitoring.supervisor import STATE_ENV

ROOT = Path(__file__).resolve().parents[1]
SSH_MODULES = ("paramiko", "nacl", "invoke", "bcrypt")

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


def top_modules(code: str, tmp_path, **env) -> set[str]:
    environ = {k: v for k, v in os.environ.items() if k != STATE_ENV}
    environ.update(DJANGO_SETTINGS_MODULE="hiveproject.settings", HIVE_DATA_DIR=str(tmp_path))
    environ.update(env)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_web_process_loads_no_ssh_library(tmp_path):
    loaded = top_modules(WEB, tmp_path)
    assert "rest_framework" in loaded and "django_q" in loaded  # the app itself was loaded
    assert loaded.isdisjoint(SSH_MODULES), loaded & set(SSH_MODULES)


def test_a_supervisor_loads_no_ssh_library(tmp_path):
    assert top_modules(SETUP_ONLY, tmp_path).isdisjoint(SSH_MODULES)


def test_the_supervised_cluster_loads_paramiko_before_its_workers_fork(tmp_path):
    assert "paramiko" in top_modules(SETUP_ONLY, tmp_path, **{STATE_ENV: str(tmp_path)})


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
