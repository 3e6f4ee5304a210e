"""The live dashboard page and the per-user layout it saves."""

import json

import pytest
from django.urls import reverse

from monitoring.models import DashboardLayout, Device

LAYOUT = reverse("dashboard-layout")


def card(html: str, host) -> str:
    """The HTML of one host's card."""
    return html.split(f'id="host-{host.pk}"')[1].split("</section>")[0]


def post_layout(client, body):
    return client.post(
        LAYOUT, body if isinstance(body, str) else json.dumps(body), "application/json"
    )


def test_it_shows_a_down_host_with_its_error_and_last_seen_time(client, node, owner):
    down = node.__class__.objects.get(name="node-2")
    down.last_seen = node.created
    down.save()
    client.force_login(owner)
    html = client.get(reverse("overview")).content.decode()
    section = card(html, down)
    assert "Unreachable" in section and "timed out" in section
    assert f"last seen {down.last_seen:%Y-%m-%d %H:%M:%S}" in section


def test_a_down_host_never_seen_says_so_and_shows_no_stale_gpus(client, node, owner):
    down = node.__class__.objects.get(name="node-2")
    down.last_snapshot = node.last_snapshot  # stale data from before it went down
    down.save()
    client.force_login(owner)
    html = client.get(reverse("overview")).content.decode()
    section = card(html, down)
    assert "never seen" in section and "Tesla T4" not in section


def test_a_lost_gpu_is_flagged(client, node, owner):
    Device.objects.create(host=node, index=1, uuid="GPU-2", name="Tesla V100", status="lost")
    client.force_login(owner)
    html = client.get(reverse("overview")).content.decode()
    assert "GPU lost: not seen since" in html and "Tesla V100" in html


def test_the_page_loads_the_vendored_chart_library_and_live_script(client, node, owner):
    client.force_login(owner)
    html = client.get(reverse("overview")).content.decode()
    assert "vendor/uplot-1.6.32/uPlot.iife.min.js" in html and "js/dashboard.js" in html
    assert "/ws/monitoring/live/" in html
    assert "https://" not in html and "http://" not in html  # no CDN at runtime


def test_everyone_starts_with_every_chart(client, owner):
    client.force_login(owner)
    assert client.get(LAYOUT).json() == {"charts": list(DashboardLayout.CHARTS), "hidden_hosts": []}


def test_the_layout_is_remembered_per_user(client, node, owner, other_user):
    client.force_login(owner)
    response = post_layout(client, {"charts": ["cpu", "gpu_power"], "hidden_hosts": [node.pk]})
    assert response.status_code == 200
    assert client.get(LAYOUT).json() == {"charts": ["cpu", "gpu_power"], "hidden_hosts": [node.pk]}
    client.force_login(other_user)
    assert client.get(LAYOUT).json()["hidden_hosts"] == []
    html = client.get(reverse("overview")).content.decode()
    assert '"charts": ["gpu_utilization"' in html


def test_an_empty_list_is_a_layout_too(client, node, owner):
    """No host hidden (the usual case) and no chart shown are choices, not missing fields."""
    client.force_login(owner)
    assert post_layout(client, {"charts": ["cpu"], "hidden_hosts": []}).status_code == 200
    assert client.get(LAYOUT).json() == {"charts": ["cpu"], "hidden_hosts": []}
    assert post_layout(client, {"charts": [], "hidden_hosts": [node.pk]}).status_code == 200
    assert client.get(LAYOUT).json() == {"charts": [], "hidden_hosts": [node.pk]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ({"charts": ["cpu", "fan_speed"], "hidden_hosts": []}, "Unknown chart(s): fan_speed"),
        ({"charts": ["cpu", "cpu"], "hidden_hosts": []}, "once"),
        ({"charts": "cpu", "hidden_hosts": []}, "list of chart names"),
        ({"charts": [], "hidden_hosts": ["node-1"]}, "integers"),
        ({"charts": [], "hidden_hosts": [99999]}, "No host with id 99999"),
        ({"charts": [], "hidden_hosts": [10**30, -1]}, f"No host with id -1, {10**30}"),
        ({"charts": []}, "required"),
    ],
)
def test_bad_layouts_get_a_clear_400_and_change_nothing(client, node, owner, body, message):
    client.force_login(owner)
    response = post_layout(client, body)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not DashboardLayout.objects.exists()


def test_anonymous_users_cannot_read_or_save_a_layout(client, db):
    assert client.get(LAYOUT).status_code == 302
    assert post_layout(client, {"charts": [], "hidden_hosts": []}).status_code == 302
    assert not DashboardLayout.objects.exists()


def test_hosts_the_user_hid_are_rendered_hidden(client, node, owner):
    DashboardLayout.objects.create(user=owner, charts=["cpu"], hidden_hosts=[node.pk])
    client.force_login(owner)
    html = client.get(reverse("overview")).content.decode()
    assert f'id="host-{node.pk}" data-host="{node.pk}" hidden>' in html
    other = node.__class__.objects.get(name="node-2")
    assert f'id="host-{other.pk}" data-host="{other.pk}">' in html
