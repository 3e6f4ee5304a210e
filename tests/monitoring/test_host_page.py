"""The host page: hardware, status, GPUs and history charts, for signed-in users only."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from core.templatetags.hive_time import when_relative
from monitoring.models import Device, Host

HARDWARE = {
    "cpu_model": "AMD EPYC 7302 16-Core Processor",
    "cpu_cores": 32,
    "memory_total_mib": 257842,
    "driver_version": "535.104.05",
    "cuda_version": "12.2",
    "disks": [{"path": "/", "total_mib": 102400, "used_mib": 25600}],
    "seen_at": "2026-03-01T10:00:00+00:00",
}


def page(name="node-1"):
    return reverse("host-detail", args=[name])


@pytest.fixture
def equipped(node):
    node.hardware = HARDWARE
    node.save()
    return node


def test_anonymous_visitors_are_sent_to_sign_in(client, equipped):
    response = client.get(page())
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize("persona", ["owner", "other_user", "admin_user"])
def test_signed_in_users_see_the_hardware(client, equipped, persona, request):
    client.force_login(request.getfixturevalue(persona))
    html = client.get(page()).content.decode()
    for text in ["AMD EPYC 7302 16-Core Processor", "32", "251.8 GiB", "535.104.05", "12.2"]:
        assert text in html
    assert "<code>/</code></td><td>25.0</td><td>100.0</td><td>25</td>" in html
    assert "Tesla T4" in html and "GPU-1" in html


def test_an_unknown_host_is_404(client, equipped, owner):
    client.force_login(owner)
    assert client.get(page("ghost")).status_code == 404


def test_a_down_host_shows_its_error_last_seen_time_and_last_known_hardware(
    client, equipped, owner
):
    seen = timezone.now() - timedelta(hours=2)
    Host.objects.filter(pk=equipped.pk).update(
        status=Host.Status.UNREACHABLE, last_seen=seen, last_error="connection refused"
    )
    client.force_login(owner)
    html = client.get(page()).content.decode()
    assert "Unreachable" in html and "connection refused" in html
    assert f"last seen {when_relative(seen)}" in html and "2 h ago" in html
    assert "535.104.05" in html and "As last seen" in html


def test_a_host_never_seen_says_so(client, node, owner):
    client.force_login(owner)
    html = client.get(page("node-2")).content.decode()
    assert "never seen" in html and "Not seen yet" in html


def test_a_lost_gpu_is_flagged_and_every_gpu_is_offered_for_history(client, equipped, owner):
    lost = Device.objects.create(host=equipped, index=1, uuid="GPU-2", name="Tesla V100")
    lost.status = Device.Status.LOST
    lost.save()
    client.force_login(owner)
    html = client.get(page()).content.decode()
    assert "GPU lost: not seen since" in html
    for device in Device.objects.filter(host=equipped):
        assert f'<option value="{device.pk}">' in html
    assert "js/history.js" in html and "uPlot.iife.min.js" in html
    assert "https://" not in html and "http://" not in html


def test_board_tiles_link_to_the_host_page_whose_live_card_shows_disks(client, equipped, owner):
    equipped.last_snapshot = {**equipped.last_snapshot, "disks": HARDWARE["disks"]}
    equipped.save()
    client.force_login(owner)
    assert f'href="{page()}"' in client.get(reverse("overview")).content.decode()
    assert "Disk / 25.0 / 100.0 GiB" in client.get(page()).content.decode()
