"""The admin as operator console: grants with windows, bans, motd, profiles, host admins."""

from datetime import date, time

import pytest

from accesscontrol.coverage import check_access
from accesscontrol.models import Ban, Grant, Message, Window
from monitoring.models import Host

from .conftest import utc


def grant_form(students, node1, **extra) -> dict:
    """'Group students may use node-1 on weekdays 8-16 (Europe/Warsaw) until June.'"""
    return {
        "name": "students on node-1",
        "note": "",
        "groups": [students.pk],
        "scope": "hosts",
        "hosts": [node1.pk],
        "valid_from": "2025-01-01",
        "valid_until": "2025-06-30",
        "windows-TOTAL_FORMS": "1",
        "windows-INITIAL_FORMS": "0",
        "windows-MIN_NUM_FORMS": "0",
        "windows-MAX_NUM_FORMS": "1000",
        "windows-0-weekdays": ["0", "1", "2", "3", "4"],
        "windows-0-start": "08:00",
        "windows-0-end": "16:00",
        **extra,
    }


CONSOLE = {  # persona -> status for: grants, bans, hosts
    "anonymous": (302, 302, 302),
    "user": (302, 302, 302),  # not staff
    "other_user": (302, 302, 302),
    "host_admin": (200, 403, 200),  # sees grants on their host; others' bans are not theirs
    "superuser": (200, 200, 200),
}


@pytest.mark.parametrize(("persona", "statuses"), CONSOLE.items())
def test_it_opens_the_console_to_staff_only(client, login_as, owner, persona, statuses):
    Grant.objects.create(name="everything").users.add(owner)  # host admins see it too
    Ban.objects.create(user=owner, reason="misuse")
    login_as(persona)
    urls = ["/admin/accesscontrol/grant/", "/admin/accesscontrol/ban/", "/admin/monitoring/host/"]
    assert tuple(client.get(url).status_code for url in urls) == statuses


@pytest.mark.parametrize(("persona", "status"), [("host_admin", 403), ("superuser", 200)])
def test_it_lets_only_operators_add_grants_and_messages(client, login_as, persona, status):
    login_as(persona)
    assert client.get("/admin/accesscontrol/grant/add/").status_code == status
    assert client.get("/admin/accesscontrol/message/add/").status_code == status


def test_it_saves_a_grant_with_windows_that_counts_at_once(
    client, login_as, warsaw, owner, students, node1, admin_user
):
    login_as("superuser")
    gpu = node1.devices.get(index=0)
    monday_9_to_10 = (utc(2025, 6, 2, 7), utc(2025, 6, 2, 8))
    assert not check_access(owner, gpu, *monday_9_to_10).allowed
    response = client.post("/admin/accesscontrol/grant/add/", grant_form(students, node1))
    assert response.status_code == 302
    grant = Grant.objects.get()
    assert grant.created_by == admin_user and grant.windows.get().weekdays == "01234"
    assert check_access(owner, gpu, *monday_9_to_10).allowed
    assert not check_access(owner, gpu, utc(2025, 6, 7, 7), utc(2025, 6, 7, 8)).allowed  # Sat
    assert not check_access(owner, gpu, utc(2025, 7, 7, 7), utc(2025, 7, 7, 8)).allowed  # July


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"hosts": []}, "Choose at least one host"),
        ({"groups": []}, "Name at least one user or group"),
        ({"valid_until": "2024-12-31"}, "cannot be before the first day"),
        ({"windows-0-weekdays": []}, "This field is required"),
    ],
)
def test_it_shows_form_errors_and_saves_nothing(client, login_as, students, node1, extra, message):
    login_as("superuser")
    response = client.post("/admin/accesscontrol/grant/add/", grant_form(students, node1, **extra))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Grant.objects.exists() and not Window.objects.exists()


def test_it_lets_host_admins_change_their_hosts_only(client, login_as, host_admin, node1, node2):
    login_as("host_admin")
    mine, theirs = (f"/admin/monitoring/host/{h.pk}/change/" for h in (node1, node2))
    assert 'name="_save"' in client.get(mine).content.decode()
    assert 'name="_save"' not in client.get(theirs).content.decode()  # read-only, like the API
    edit = {
        "name": "renamed",
        "address": "x.example.org",
        "port": 22,
        "username": "root",
        "transport": "ssh",
        "enabled": "on",
        "devices-TOTAL_FORMS": "0",
        "devices-INITIAL_FORMS": "0",
    }
    assert client.post(theirs, edit).status_code == 403
    assert client.post(mine, edit).status_code == 302
    assert sorted(Host.objects.values_list("name", flat=True)) == ["node-2", "renamed"]


def test_it_keeps_object_permissions_to_superusers(client, login_as, node1):
    login_as("host_admin")
    page = client.get(f"/admin/monitoring/host/{node1.pk}/permissions/")
    assert page.status_code == 302  # not the page where permissions are given away
    login_as("superuser")
    assert client.get(f"/admin/monitoring/host/{node1.pk}/permissions/").status_code == 200


def test_it_bans_from_the_admin_with_immediate_effect(
    client, login_as, warsaw, owner, node1, admin_user
):
    grant = Grant.objects.create(name="all", valid_from=date(2025, 1, 1))
    grant.users.add(owner)
    gpu = node1.devices.get(index=0)
    assert check_access(owner, gpu, utc(2030, 1, 1), utc(2030, 1, 2)).allowed
    login_as("superuser")
    response = client.post(
        "/admin/accesscontrol/ban/add/",
        {"user": owner.pk, "reason": "misuse", "created_0": "2025-01-01", "created_1": "00:00"},
    )
    assert response.status_code == 302
    assert Ban.objects.get().created_by == admin_user
    decision = check_access(owner, gpu, utc(2030, 1, 1), utc(2030, 1, 2))
    assert not decision.allowed and "misuse" in decision.reason


def test_it_edits_profiles_on_the_user_page(client, login_as, owner):
    login_as("superuser")
    page = client.get(f"/admin/auth/user/{owner.pk}/change/").content.decode()
    assert "unix_username" in page and "bans" in page
    assert client.get("/admin/auth/user/add/").status_code == 200


def test_it_edits_the_message_of_the_day(client, login_as):
    login_as("superuser")
    response = client.post(
        "/admin/accesscontrol/message/add/",
        {
            "text": "Maintenance on Friday",
            "level": "warning",
            "enabled": "on",
            "starts_0": "2025-01-01",
            "starts_1": "00:00",
        },
    )
    assert response.status_code == 302
    assert Message.objects.active().get().text == "Maintenance on Friday"


def test_window_shows_overnight_and_full_days(db):
    grant = Grant.objects.create(name="g")
    window = Window.objects.create(grant=grant, weekdays="40", start=time(22), end=time(6))
    assert window.weekdays == "04" and str(window) == "Mon, Fri 22:00–06:00"
