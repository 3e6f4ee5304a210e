"""/api/grants/ and /api/access/: permission matrix, validation, what users may see."""

from datetime import date, time

import pytest

from accesscontrol.models import Grant, Window
from accesscontrol.services import ban_user

GRANTS = "/api/grants/"
ACCESS = "/api/access/"
WEEK = {"start": "2025-06-02T00:00:00+02:00", "end": "2025-06-03T00:00:00+02:00"}


@pytest.fixture
def shared_grant(warsaw, owner, other_user, students, node1):
    grant = Grant.objects.create(name="node-1 weekdays", scope="hosts", valid_from=date(2025, 1, 1))
    grant.users.add(owner, other_user)
    grant.groups.add(students)
    grant.hosts.add(node1)
    Window.objects.create(grant=grant, weekdays="01234", start=time(8), end=time(16))
    return grant


def new_grant(node1, students) -> dict:
    return {
        "name": "students on node-1, weekdays 8-16 until June",
        "groups": [students.pk],
        "scope": "hosts",
        "hosts": [node1.pk],
        "valid_from": "2025-01-01",
        "valid_until": "2025-06-30",
        "windows": [{"weekdays": [0, 1, 2, 3, 4], "start": "08:00", "end": "16:00"}],
    }


@pytest.mark.parametrize(
    ("persona", "listed", "create"),
    [
        ("anonymous", 403, 403),
        ("user", 200, 403),
        ("other_user", 200, 403),
        ("host_admin", 200, 403),
        ("superuser", 200, 201),
    ],
)
def test_it_lets_only_operators_write_grants(
    client, login_as, node1, students, persona, listed, create
):
    login_as(persona)
    assert client.get(GRANTS).status_code == listed
    response = client.post(GRANTS, new_grant(node1, students), content_type="application/json")
    assert response.status_code == create
    assert Grant.objects.exists() == (create == 201)


def test_it_stores_windows_written_through_the_api(client, login_as, node1, students):
    login_as("superuser")
    body = client.post(GRANTS, new_grant(node1, students), content_type="application/json").json()
    assert body["windows"] == [
        {"weekdays": [0, 1, 2, 3, 4], "start": "08:00:00", "end": "16:00:00"}
    ]
    grant = Grant.objects.get(pk=body["id"])
    assert str(grant.windows.get()) == "Mon, Tue, Wed, Thu, Fri 08:00–16:00"
    changed = client.patch(
        f"{GRANTS}{grant.pk}/",
        {"windows": [{"weekdays": [5], "start": "22:00", "end": "06:00"}]},
        content_type="application/json",
    )
    assert changed.status_code == 200
    assert [str(w) for w in grant.windows.all()] == ["Sat 22:00–06:00"]


def test_it_shows_users_their_grants_without_other_people(
    client, login_as, shared_grant, owner, other_user, students, admin_user
):
    login_as("user")
    [seen] = client.get(GRANTS).json()
    assert seen["users"] == [owner.pk] and seen["groups"] == [students.pk]
    login_as("other_user")
    [seen] = client.get(GRANTS).json()
    assert seen["users"] == [other_user.pk] and seen["groups"] == []
    login_as("superuser")
    [seen] = client.get(GRANTS).json()
    assert sorted(seen["users"]) == sorted([owner.pk, other_user.pk])


def test_it_hides_grants_that_do_not_apply(client, login_as, shared_grant, owner, admin_user):
    shared_grant.users.set([admin_user])
    shared_grant.groups.clear()
    login_as("user")
    assert client.get(GRANTS).json() == []
    assert client.get(f"{GRANTS}{shared_grant.pk}/").status_code == 404
    assert client.delete(f"{GRANTS}{shared_grant.pk}/").status_code in (403, 404)
    assert Grant.objects.filter(pk=shared_grant.pk).exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"hosts": []}, "hosts"),
        ({"groups": []}, "users"),
        ({"valid_until": "2024-01-01"}, "valid_until"),
        ({"windows": [{"weekdays": [], "start": "08:00", "end": "09:00"}]}, "windows"),
        ({"windows": [{"weekdays": [7], "start": "08:00", "end": "09:00"}]}, "windows"),
        ({"windows": [{"weekdays": [1, 1], "start": "08:00", "end": "09:00"}]}, "windows"),
        ({"windows": [{"weekdays": [1], "start": "25:00", "end": "09:00"}]}, "windows"),
        ({"scope": "everywhere"}, "scope"),
    ],
)
def test_it_refuses_bad_grants_with_400_and_changes_nothing(
    client, login_as, node1, students, change, field
):
    login_as("superuser")
    response = client.post(
        GRANTS, {**new_grant(node1, students), **change}, content_type="application/json"
    )
    assert response.status_code == 400
    assert field in response.json()
    assert not Grant.objects.exists()


@pytest.mark.parametrize(
    ("persona", "own", "others"),
    [
        ("anonymous", 403, 403),
        ("user", 200, 200),  # asking about themself
        ("other_user", 200, 403),
        ("host_admin", 200, 200),
        ("superuser", 200, 200),
    ],
)
def test_it_answers_my_access_and_others_only_to_admins(
    client, login_as, owner, shared_grant, persona, own, others
):
    login_as(persona)
    assert client.get(ACCESS, WEEK).status_code == own
    assert client.get(ACCESS, {**WEEK, "user": owner.pk}).status_code == others


def test_it_lists_covered_intervals_in_the_site_zone(client, login_as, shared_grant, node2):
    login_as("user")
    body = client.get(ACCESS, WEEK).json()
    assert body["time_zone"] == "Europe/Warsaw" and body["ban"] is None
    covered = {d["name"]: d["covered"] for d in body["devices"]}
    monday = [{"start": "2025-06-02T08:00:00+02:00", "end": "2025-06-02T16:00:00+02:00"}]
    assert covered == {"node-1:0": monday, "node-1:1": monday, "node-2:0": []}


def test_it_narrows_to_one_device(client, login_as, shared_grant, node1):
    login_as("user")
    device = node1.devices.get(index=1)
    body = client.get(ACCESS, {**WEEK, "device": device.pk}).json()
    assert [d["id"] for d in body["devices"]] == [device.pk]


@pytest.mark.parametrize(
    ("persona", "code", "windows"),
    [
        ("anonymous", 403, None),
        ("user", 200, 1),  # the shared grant's Monday window
        ("other_user", 200, 1),
        ("host_admin", 200, 0),  # no grant of their own
        ("superuser", 200, 0),  # neither: their own access is a grant's too
    ],
)
def test_it_narrows_to_the_devices_listed(
    client, login_as, shared_grant, node1, node2, persona, code, windows
):
    """The week calendar asks for the GPUs it shows: ids, comma-separated."""
    login_as(persona)
    ids = [node1.devices.get(index=1).pk, node2.devices.get().pk]
    response = client.get(ACCESS, {**WEEK, "device": f"{ids[0]},{ids[1]}"})
    assert response.status_code == code
    if code == 200:
        devices = response.json()["devices"]
        assert [d["id"] for d in devices] == ids
        assert [len(d["covered"]) for d in devices] == [windows, 0]


def test_a_host_admin_asking_about_others_sees_only_their_hosts_of_those_listed(
    client, login_as, owner, shared_grant, node1, node2
):
    login_as("host_admin")
    ids = [node1.devices.get(index=0).pk, node2.devices.get().pk]
    query = {**WEEK, "user": owner.pk, "device": f"{ids[0]},{ids[1]}"}
    assert [d["id"] for d in client.get(ACCESS, query).json()["devices"]] == ids[:1]


def test_it_shows_host_admins_only_their_hosts_for_others(
    client, login_as, owner, shared_grant, node2
):
    login_as("host_admin")
    body = client.get(ACCESS, {**WEEK, "user": owner.pk}).json()
    assert {d["host"] for d in body["devices"]} == {"node-1"}


def test_it_reports_a_ban_at_once(client, login_as, owner, shared_grant):
    login_as("user")
    ban_user(owner, "misuse")
    body = client.get(ACCESS, WEEK).json()
    assert body["ban"] == {"reason": "misuse", "until": None}
    assert all(d["covered"] == [] for d in body["devices"])


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ({}, "start", "Required"),
        ({"start": "yesterday", "end": WEEK["end"]}, "start", "not an ISO 8601"),
        ({"start": "2025-06-02T00:00:00 02:00", "end": WEEK["end"]}, "start", "%2B"),
        ({"start": "2025-02-30T00:00:00Z", "end": WEEK["end"]}, "start", "not an ISO 8601"),
        ({"start": "2025-06-02T00:00:00", "end": WEEK["end"]}, "start", "UTC offset"),
        ({"start": "0001-01-01T00:00:00+05:00", "end": WEEK["end"]}, "start", "year"),
        ({"start": WEEK["end"], "end": WEEK["start"]}, "end", "after the start"),
        ({"start": "2025-01-01T00:00:00Z", "end": "2026-06-01T00:00:00Z"}, "end", "366"),
        ({**WEEK, "device": 999999}, "device", "does not exist"),
        ({**WEEK, "user": "abc"}, "user", "valid integer"),
        ({**WEEK, "device": "1.5"}, "device", "valid integer"),
        ({**WEEK, "device": "1,,2"}, "device", "valid integer"),
        ({**WEEK, "device": str(10**30)}, "device", "less than or equal"),
        ({**WEEK, "device": "7,7"}, "device", "listed once"),
        ({**WEEK, "group": str(10**30)}, "group", "does not exist"),
    ],
)
def test_it_answers_bad_queries_with_400_and_a_message(client, login_as, query, field, words):
    login_as("user")
    response = client.get(ACCESS, query)
    assert response.status_code == 400
    assert words in " ".join(response.json()[field])


def test_it_refuses_a_user_and_a_group_together(client, login_as, owner, students):
    login_as("superuser")
    response = client.get(ACCESS, {**WEEK, "user": owner.pk, "group": students.pk})
    assert response.status_code == 400
    assert "not both" in response.json()["group"][0]
