"""History lives in the database: what one service process recorded, the next one serves.

Each step runs in its own process on one SQLite data directory (the embedded profile), so
nothing can come from memory: a probing process records a cycle and exits, then a fresh
process answers the history API.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.realparts import FAKE_BIN, FakeGpus

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
from monitoring.loop import ProbeLoop
from monitoring.models import Host
Host.objects.create(name="localhost", address="localhost", transport="local")
loop = ProbeLoop(holder="first-process")
for _ in range(20):
    if loop.cycle():
        break
loop.executor.shutdown(wait=True)
"""

READ = """
import json
from django.contrib.auth import get_user_model
from django.test import Client
from monitoring.models import Device
user = get_user_model().objects.create_user("reader", password="pw-reader-1")
client = Client(HTTP_HOST="localhost")
client.force_login(user)
device = Device.objects.get(uuid="GPU-restart")
print(json.dumps(client.get(f"/api/devices/{device.pk}/history/").json()))
"""


def manage(env, *args) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_history_recorded_by_one_process_is_served_after_a_restart(tmp_path):
    fake = FakeGpus(tmp_path / "gpus", "local")
    fake.set_gpus(["0, GPU-restart, 40960, 1234, 56, 7, 48, 150.25, NVIDIA A100-SXM4-40GB"])
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(
        HIVE_DATA_DIR=str(tmp_path / "data"),
        PATH=f"{FAKE_BIN}:{os.environ['PATH']}",
        FAKE_GPU_DIR=str(tmp_path / "gpus"),
        MONITORING_INTERVAL="0.5",
    )
    manage(env, "migrate", "-v0")
    manage(env, "shell", "-c", PROBE)
    history = json.loads(manage(env, "shell", "-c", READ).strip().splitlines()[-1])
    assert history["resolution"] == "raw"
    assert [(s["utilization_gpu"], s["memory_used_mib"]) for s in history["samples"]] == [
        (56.0, 1234.0)
    ]
