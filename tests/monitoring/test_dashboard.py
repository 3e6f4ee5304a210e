"""The per-user chart layout of the host pages' live cards, read and saved through the API
(/api/dashboard/layout/)."""

import json

import pytest
from django.urls import reverse

from monitoring.models import DashboardLayout

LAYOUT = reverse("api:dashboard-layout")


def put_layout(client, body):
    return client.put(
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
    response = put_layout(client, {"charts": ["cpu", "gpu_power"], "hidden_hosts": [node.pk]})
    assert response.status_code == 200
    assert client.get(LAYOUT).json() == {"charts": ["cpu", "gpu_power"], "hidden_hosts": [node.pk]}
    client.force_login(other_user)
    assert client.get(LAYOUT).json()["hidden_hosts"] == []
    html = client.get(reverse("host-detail", args=[node.name])).content.decode()
    assert '"charts": ["gpu_utilization"' in html


def test_an_empty_list_is_a_layout_too(client, node, owner):
    """No host hidden (the usual case) and no chart shown are choices, not missing fields."""
    client.force_login(owner)
    assert put_layout(client, {"charts": ["cpu"], "hidden_hosts": []}).status_code == 200
    assert client.get(LAYOUT).json() == {"charts": ["cpu"], "hidden_hosts": []}
    assert put_layout(client, {"charts": [], "hidden_hosts": [node.pk]}).status_code == 200
    assert client.get(LAYOUT).json() == {"charts": [], "hidden_hosts": [node.pk]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{not json", "JSON parse error"),
        ("[1, 2]", "Expected a dictionary"),
        ({"charts": ["cpu", "fan_speed"], "hidden_hosts": []}, "Unknown chart(s): fan_speed"),
        ({"charts": ["cpu", "cpu"], "hidden_hosts": []}, "once"),
        ({"charts": "cpu", "hidden_hosts": []}, "Expected a list"),
        ({"charts": [], "hidden_hosts": ["node-1"]}, "valid integer"),
        ({"charts": [], "hidden_hosts": [99999]}, "No host with id 99999"),
        ({"charts": [], "hidden_hosts": [10**30]}, "less than or equal to"),
        ({"charts": [], "hidden_hosts": [-1]}, "greater than or equal to 1"),
        ({"charts": []}, "required"),
    ],
)
def test_bad_layouts_get_a_clear_400_and_change_nothing(client, node, owner, body, message):
    client.force_login(owner)
    response = put_layout(client, body)
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not DashboardLayout.objects.exists()


@pytest.mark.parametrize(
    ("persona", "code"),
    [("anonymous", 403), ("owner", 200), ("other_user", 200), ("admin_user", 200)],
)
def test_each_user_reads_and_saves_only_their_own_layout(
    client, node, owner, request, persona, code
):
    """The owner's saved layout; nobody else, admins included, reads or changes it here."""
    DashboardLayout.objects.create(user=owner, charts=["cpu"], hidden_hosts=[node.pk])
    reader = None if persona == "anonymous" else request.getfixturevalue(persona)
    if reader:
        client.force_login(reader)
    read = client.get(LAYOUT)
    saved = put_layout(client, {"charts": ["ram"], "hidden_hosts": []})
    assert (read.status_code, saved.status_code) == (code, code)
    if reader == owner:
        assert read.json() == {"charts": ["cpu"], "hidden_hosts": [node.pk]}
    elif reader:  # their own, still the default; then saved as theirs
        assert read.json() == {"charts": list(DashboardLayout.CHARTS), "hidden_hosts": []}
        assert DashboardLayout.objects.get(user=reader).charts == ["ram"]
    owners = DashboardLayout.objects.get(user=owner).charts
    assert owners == (["ram"] if reader == owner else ["cpu"])


def test_the_old_layout_endpoint_is_gone(client, owner):
    client.force_login(owner)
    assert client.get("/dashboard/layout").status_code == 404
