"""Fair use in a real browser: keep an idle booking in one click from its page, read the
usage table, add a chat channel; each page also at phone width."""

import os
from datetime import timedelta

import pytest
from django.utils import timezone

from accesscontrol.services import ensure_default_group
from accounting import rollup
from fairuse import idle
from fairuse.models import IdleNotice
from monitoring.models import Device, Host
from notifications.models import Channel
from reservations.services import create_reservation

pytestmark = pytest.mark.django_db(transaction=True)
SHOTS = os.environ.get("HIVE_SCREENSHOTS")  # a folder: keep screenshots to look at


@pytest.fixture
def warned(owner, settings):
    settings.FAIRUSE_IDLE_ACTION = "release"
    settings.FAIRUSE_IDLE_MINUTES = 0
    host = Host.objects.create(name="node-1", address="10.0.0.1", status=Host.Status.UP,
                               last_probe_at=timezone.now())  # fmt: skip
    gpu = Device.objects.create(host=host, index=0, uuid="GPU-0", name="Tesla T4")
    host.last_snapshot = {"reachable": True, "processes": [],
                          "gpus": [{"uuid": "GPU-0", "utilization_gpu": 0.0}]}  # fmt: skip
    host.save()
    ensure_default_group()
    start = timezone.now() - timedelta(seconds=30)
    create_reservation(owner, title="thesis", devices=[gpu], start=start,
                       end=start + timedelta(hours=2))  # fmt: skip
    idle.check_hosts([host.pk])
    return IdleNotice.objects.get()


def shoot(page, name):
    if SHOTS:
        for width in (1400, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=f"{SHOTS}/{name}-{width}.png", full_page=True)
        page.set_viewport_size({"width": 1400, "height": 900})


def test_keep_an_idle_booking_read_usage_and_add_a_channel(login, live_server, warned):
    page = login("owner", "pw-owner-1")
    page.goto(f"{live_server.url}/fairuse/idle/")
    assert "Warned" in page.inner_text("body")
    shoot(page, "idle")
    page.click("a:has-text('Keep it') >> nth=0")
    page.click("button:has-text('Keep it')")
    assert "'thesis' is kept" in page.inner_text("body")
    warned.refresh_from_db()
    assert warned.state == IdleNotice.State.KEPT

    rollup.compute_recent()
    page.goto(f"{live_server.url}/usage/?by=host")
    assert "node-1" in page.inner_text("table")
    shoot(page, "usage")

    page.goto(f"{live_server.url}/notifications/")
    page.select_option("select[name=kind]", "slack")
    page.fill("input[name=target]", "https://hooks.example.org/services/T0")
    page.click("button:has-text('Add')")
    assert Channel.objects.get(kind="slack").user.username == "owner"
    shoot(page, "notifications")
