"""Prepare a load run: users with open sessions, hosts with GPUs (stored probes), a grant.

Run with the service's settings (HIVE_DATA_DIR, DATABASE_URL): it writes `sessions.json`,
which the locust users read. Logins are made here, not under load: each one costs a
deliberately slow password hash, which would measure PBKDF2 rather than the service.
"""

import json
import os
import secrets
import string
import sys
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hiveproject.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import (  # noqa: E402
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    get_user_model,  # noqa: E402
)
from django.contrib.auth.models import Group  # noqa: E402
from django.contrib.sessions.backends.db import SessionStore  # noqa: E402
from django.utils import timezone  # noqa: E402

from accesscontrol.models import Grant  # noqa: E402
from monitoring.models import Device, Host  # noqa: E402

HOSTS, GPUS_PER_HOST = 10, 4


def snapshot(name: str) -> dict:
    gpus = [
        {
            "index": i,
            "uuid": f"GPU-{name}-{i}",
            "name": "NVIDIA A100-SXM4-40GB",
            "memory_total_mib": 40960,
            "memory_used_mib": 1000 * i,
            "utilization_gpu": 10 * i,
            "utilization_memory": 5,
            "temperature_c": 40 + i,
            "power_w": 60.5,
        }
        for i in range(GPUS_PER_HOST)
    ]
    return {
        "host": name,
        "reachable": True,
        "error": None,
        "gpus": gpus,
        "processes": [],
        "cpu": {"utilization": 12.5, "memory_total_mib": 515000, "memory_used_mib": 20000},
    }


def make_hosts() -> list[int]:
    """Hosts as the probing loop would have left them (no loop runs during the test)."""
    now, ids = timezone.now(), []
    for h in range(HOSTS):
        name = f"load-{h:02d}"
        host, _ = Host.objects.update_or_create(
            name=name,
            defaults={
                "address": f"10.99.0.{h + 1}",
                "status": Host.Status.UP,
                "last_seen": now,
                "last_probe_at": now,
                "last_snapshot": snapshot(name),
            },
        )
        for i in range(GPUS_PER_HOST):
            device, _ = Device.objects.get_or_create(
                host=host, uuid=f"GPU-{name}-{i}", defaults={"index": i, "name": "A100"}
            )
            ids.append(device.pk)
    return ids


def make_users(count: int) -> list[dict]:
    everyone, _ = Group.objects.get_or_create(name="load-everyone")
    grant, _ = Grant.objects.get_or_create(name="load test: everyone, every GPU")
    grant.groups.add(everyone)
    users, alphabet = [], string.ascii_letters + string.digits
    for n in range(count):
        user, created = get_user_model().objects.get_or_create(username=f"load-{n:03d}")
        if created:
            user.set_unusable_password()
            user.save()
        user.groups.add(everyone)
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        csrf = "".join(secrets.choice(alphabet) for _ in range(32))
        users.append({"user": user.username, "session": session.session_key, "csrf": csrf})
    return users


if __name__ == "__main__":
    out = Path(sys.argv[1])
    devices = make_hosts()
    users = make_users(int(sys.argv[2]) if len(sys.argv) > 2 else 200)
    out.write_text(json.dumps({"devices": devices, "users": users}))
    print(f"{len(users)} users, {len(devices)} GPUs on {HOSTS} hosts -> {out}")
