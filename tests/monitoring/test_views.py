"""Permissions and content of the inventory pages, API and admin console."""

import pytest
from django.urls import reverse

from monitoring.models import Host
from monitoring.tasks import probe_host_now
from tests.monitoring.test_api import in_containers

PAGES = [reverse("overview"), "/api/hosts/", "/api/devices/"]


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_users_see_nothing(client, node, url):
    response = client.get(url)
    assert response.status_code in (302, 403)
    assert b"node-1" not in response.content


@pytest.mark.parametrize("url", PAGES)
@pytest.mark.parametrize("persona", ["owner", "other_user", "admin_user"])
def test_signed_in_users_see_the_lab(client, node, url, persona, request):
    client.force_login(request.getfixturevalue(persona))
    response = client.get(url)
    assert response.status_code == 200
    assert b"node-1" in response.content or b"GPU-1" in response.content


def test_the_board_shows_gpus_their_users_and_down_hosts(client, node, owner):
    client.force_login(owner)
    html = client.get(reverse("overview")).content.decode()
    assert "Tesla T4" in html and "unknown owner" in html
    assert "Unreachable" in html and "timed out" in html


def test_the_host_page_shows_the_processes_commands(client, node, owner, admin_user):
    client.force_login(admin_user)
    html = client.get(reverse("host-detail", args=["node-1"])).content.decode()
    assert "python x.py" in html and "unknown owner" in html
    client.force_login(owner)  # not the owner's process: its command line stays hidden
    html = client.get(reverse("host-detail", args=["node-1"])).content.decode()
    assert "python x.py" not in html and "command hidden" in html


def test_the_host_page_says_whose_a_containers_process_is(client, node, admin_user):
    in_containers(node)
    client.force_login(admin_user)
    html = client.get(reverse("host-detail", args=["node-1"])).content.decode()
    assert "<td>alice (container train-3)</td>" in html
    assert "<td>container eval-7 (owner unknown)</td>" in html and ">root<" not in html


def test_the_api_never_shows_the_raw_host_key(client, node, owner):
    client.force_login(owner)
    assert b"AAAAsecret" not in client.get("/api/hosts/").content


def test_the_inventory_api_is_read_only(client, node, admin_user):
    client.force_login(admin_user)
    response = client.post("/api/hosts/", {"name": "x", "address": "10.0.0.3"})
    assert response.status_code == 405
    assert Host.objects.count() == 2


@pytest.mark.parametrize(
    ("persona", "status"), [("owner", 302), ("other_user", 302), ("admin_user", 200)]
)
def test_only_admins_reach_the_operator_console(client, node, persona, status, request):
    client.force_login(request.getfixturevalue(persona))
    assert client.get(reverse("admin:monitoring_host_changelist")).status_code == status
    assert client.get(reverse("admin:monitoring_device_changelist")).status_code == status


def test_the_admin_lists_hosts_with_their_status_and_filters(client, node, admin_user):
    client.force_login(admin_user)
    html = client.get(reverse("admin:monitoring_host_changelist") + "?status=unreachable")
    assert "node-2" in html.content.decode() and "node-1" not in html.content.decode()


def test_probe_now_queues_a_background_probe(
    client, node, admin_user, django_capture_on_commit_callbacks
):
    from django_q.brokers import get_broker

    broker = get_broker()  # the ORM queue, or Redis in the production profile
    broker.purge_queue()
    client.force_login(admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("admin:monitoring_host_changelist"),
            {"action": "probe_now", "_selected_action": [node.pk]},
            follow=True,
        )
    assert "Probe queued for 1 host" in response.content.decode()
    assert broker.queue_size() == 1
    broker.purge_queue()


def test_the_probe_task_records_its_outcome_on_the_host(db, settings):
    settings.SSH_CONNECT_TIMEOUT = 1
    host = Host.objects.create(name="gone", address="127.0.0.1", port=1)
    assert "connection refused" in probe_host_now(host.pk)
    host.refresh_from_db()
    assert host.status == Host.Status.UNREACHABLE and "connection refused" in host.last_error
    assert probe_host_now(999) == "host 999 no longer exists"


def test_forget_host_key_lets_the_next_key_in(client, node, admin_user):
    node.status = Host.Status.HOST_KEY_CHANGED
    node.save()
    client.force_login(admin_user)
    client.post(
        reverse("admin:monitoring_host_changelist"),
        {"action": "forget_host_key", "_selected_action": [node.pk]},
    )
    node.refresh_from_db()
    assert node.host_key == "" and node.status == Host.Status.UNKNOWN


def test_a_user_who_is_not_staff_logs_in_on_the_login_page(client, owner, node):
    response = client.post(
        reverse("login"), {"username": "owner", "password": "pw-owner-1"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("overview")
    assert "node-1" in response.content.decode()


def test_a_wrong_password_is_refused_with_a_message(client, owner):
    response = client.post(reverse("login"), {"username": "owner", "password": "nope"})
    assert response.status_code == 200
    assert "didn't match" in response.content.decode()
