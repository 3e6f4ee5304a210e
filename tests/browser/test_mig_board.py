"""The board with a GPU in MIG mode, in Chromium at desktop and phone widths: its slices'
tiles follow its own, set in, named node:GPU.slice with their profile; no sideways
scrolling, no console error, no serious accessibility violation."""

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from board.demo import PASSWORD
from monitoring.models import Device, Host
from reservations.services import create_reservation

from .test_pages import check, open_as, problems

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def mig_host(db):
    """An H100 split 3g.40gb + 2g.20gb + 1g.10gb + 1g.10gb, as the capture in
    tests/fixtures/nvidia-smi-mig/h100 shows it under load, slice 3 booked by bob."""
    ada = get_user_model().objects.create_user("ada", password=PASSWORD)
    bob = get_user_model().objects.create_user("bob", password=PASSWORD)
    ensure_default_group()
    host = Host.objects.create(name="h100-1", address="10.0.0.1", status=Host.Status.UP)
    gpu = Device.objects.create(
        host=host, index=0, uuid="GPU-0", name="NVIDIA H100 80GB HBM3", mig_enabled=True,
        memory_total_mib=81559,
    )  # fmt: skip
    sizes = [("3g.40gb", 40448, 11091), ("2g.20gb", 20096, 17), ("1g.10gb", 9984, 9)]
    sizes.append(("1g.10gb", 9984, 9))
    slices = [
        Device.objects.create(
            host=host, index=0, uuid=f"MIG-{n}", name=gpu.name, parent=gpu, mig_profile=p,
            mig_index=n, memory_total_mib=total,
        )
        for n, (p, total, _) in enumerate(sizes)
    ]  # fmt: skip
    host.last_snapshot = {
        "host": host.name,
        "reachable": True,
        "error": None,
        "gpus": [{"uuid": "GPU-0", "memory_used_mib": 11125, "memory_total_mib": 81559,
                  "temperature_c": 53, "power_w": 433.78, "utilization_gpu": None}],
        "slices": [{"uuid": f"MIG-{n}", "memory_used_mib": used, "memory_total_mib": total}
                   for n, (_, total, used) in enumerate(sizes)],
        "processes": [{"gpu_uuid": "MIG-0", "pid": 21198, "user": "ada", "command": "gpu_burn"}],
        "cpu": {"utilization": 3.0, "memory_total_mib": 1000, "memory_used_mib": 100},
    }  # fmt: skip
    host.last_probe_at = timezone.now()
    host.save()
    now = timezone.now()
    create_reservation(bob, title="b", devices=[slices[3]], start=now, end=now + timedelta(hours=2))
    return ada


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_slices_follow_their_gpu_on_the_board(asgi_live_server, mig_host, page, width):
    errors = open_as(page, asgi_live_server, "ada", width)
    found = problems(check(page, asgi_live_server + "/", errors), "/")
    assert found == [], "\n".join(found)
    names = page.locator("#board .gt-name").all_inner_texts()
    assert names == ["h100-1:0", "h100-1:0.0", "h100-1:0.1", "h100-1:0.2", "h100-1:0.3"]
    tiles = page.locator("#board .gpu-tile")
    assert "MIG slices in use" in tiles.nth(0).inner_text()
    assert "MIG 3g.40gb" in tiles.nth(1).inner_text() and "ada" in tiles.nth(1).inner_text()
    assert "reserved by bob" in tiles.nth(4).inner_text()
    first, second = (tiles.nth(i).bounding_box() for i in (0, 1))
    assert second["x"] > first["x"] or second["y"] > first["y"]  # after its GPU
    if os.environ.get("HIVE_SCREENSHOTS"):  # to look at, as a user would
        target = Path(os.environ["HIVE_SCREENSHOTS"]) / f"board-mig-{width}.png"
        page.screenshot(path=str(target), full_page=True)


def test_slices_follow_their_gpu_in_the_dense_view(asgi_live_server, mig_host, page):
    errors = open_as(page, asgi_live_server, "ada", "desktop")
    found = problems(check(page, asgi_live_server + "/?layout=dense", errors), "/?layout=dense")
    assert found == [], "\n".join(found)
    cells = page.locator("#board .dc").all_inner_texts()
    assert cells == ["0", "0.0", "0.1", "0.2", "0.3"]
    assert (
        page.locator("#board .dc")
        .nth(1)
        .get_attribute("aria-label")
        .startswith("h100-1:0.0 MIG 3g.40gb")
    )
