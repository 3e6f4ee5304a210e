"""The per-user chart layout of the host pages' live cards."""

import json

import pytest
from django.urls import reverse

from monitoring.models import DashboardLayout

LAYOUT = reverse("dashboard-layout")


def post_layout(client, body):
    return client.post(
        LAYOUT, body if isinstance(body, str) else json.dumps(body), "application/json"
    )


def test_the_host_page_loads_the_vendored_chart_library_and_live_script(client, node, owner):
    client.force_login(owner)
    html = client.get(reverse("host-detail", args=[node.name])).content.decode()
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
    html = client.get(reverse("host-detail", args=[node.name])).content.decode()
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
