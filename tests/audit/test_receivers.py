"""What the audit log records without the acting code calling it: grants and bans edited in
the admin, SSH alarms the probing loop notices, and sign-ins."""

import pytest

from accesscontrol.models import Ban, Grant
from audit.models import AuditEvent
from monitoring.inventory import probe_and_record
from monitoring.models import Host
from tests.accesscontrol.test_admin import grant_form

pytestmark = pytest.mark.django_db


def events(prefix=""):
    return list(
        AuditEvent.objects.filter(action__startswith=prefix)
        .order_by("id")
        .values_list("actor_name", "action", "target")
    )


@pytest.fixture
def students(owner):
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="students")
    group.user_set.add(owner)
    return group


@pytest.fixture
def node1(db):
    return Host.objects.create(name="node-1", address="node-1.example.org")


def test_a_grant_made_and_edited_in_the_admin_names_the_admin(client, admin_user, students, node1):
    client.force_login(admin_user)
    assert client.post("/admin/accesscontrol/grant/add/", grant_form(students, node1)).status_code
    grant = Grant.objects.get()
    assert events("grant.") == [
        ("boss", "grant.created", "students on node-1"),
        ("boss", "grant.groups_added", "students on node-1"),
        ("boss", "grant.hosts_added", "students on node-1"),
    ]
    created = AuditEvent.objects.get(action="grant.created")
    assert created.actor == admin_user
    assert created.detail["changes"]["valid_until"] == [None, "2025-06-30"]

    form = grant_form(students, node1, valid_until="2025-09-30")
    form.update({"windows-TOTAL_FORMS": "0", "windows-INITIAL_FORMS": "0"})
    response = client.post(f"/admin/accesscontrol/grant/{grant.pk}/change/", form)
    assert response.status_code == 302
    changed = AuditEvent.objects.filter(action="grant.changed").get()
    assert changed.actor_name == "boss"
    assert changed.detail["changes"] == {"valid_until": ["2025-06-30", "2025-09-30"]}


def test_removing_people_from_a_grant_and_deleting_it_are_logged(owner, other_user):
    grant = Grant.objects.create(name="everything")
    grant.users.add(owner, other_user)
    other_user.access_grants.remove(grant)  # seen from the user's side
    grant_id = grant.pk
    grant.delete()
    assert events("grant.") == [
        ("system", "grant.created", "everything"),
        ("system", "grant.users_added", "everything"),
        ("system", "grant.users_removed", "user other"),
        ("system", "grant.deleted", "everything"),
    ]
    added = AuditEvent.objects.get(action="grant.users_added")
    assert added.detail == {"users": sorted([owner.pk, other_user.pk]), "grants": [grant_id]}


def test_a_ban_from_the_admin_and_lifting_it_are_logged(client, admin_user, owner):
    client.force_login(admin_user)
    response = client.post(
        "/admin/accesscontrol/ban/add/",
        {"user": owner.pk, "reason": "misuse", "created_0": "2025-01-01", "created_1": "00:00"},
    )
    assert response.status_code == 302
    ban = Ban.objects.get()
    client.post(f"/admin/accesscontrol/ban/{ban.pk}/delete/", {"post": "yes"})
    assert not Ban.objects.exists()
    assert events("ban.") + events("user.banned") == [
        ("boss", "ban.lifted", "owner"),
        ("boss", "user.banned", "owner"),
    ]
    banned = AuditEvent.objects.get(action="user.banned")
    assert banned.detail["reason"] == "misuse" and banned.detail["until"] is None


def test_a_ban_made_by_a_task_names_its_creator(admin_user, owner):
    Ban.objects.create(user=owner, reason="protection", created_by=admin_user)
    assert events("user.banned") == [("boss", "user.banned", "owner")]


def test_a_refused_ssh_login_is_logged_once_not_every_cycle(host_behind):
    for _ in range(2):
        probe_and_record(host_behind)
    host_behind.refresh_from_db()
    assert host_behind.status == Host.Status.AUTH_FAILED
    assert events("host.") == [("system", "host.ssh_login_failed", "node-7")]
    detail = AuditEvent.objects.get().detail
    assert detail["address"] == f"127.0.0.1:{host_behind.port}" and detail["error"]


def test_a_changed_host_key_is_logged(host_behind):
    """The key on record is not the one the server presents: refused, and logged."""
    host_behind.host_key_type = "ssh-ed25519"
    host_behind.host_key = "AAAAC3NzaC1lZDI1NTE5AAAAIDTqQ4JfX1j0r3bPr4WMeG3gmR9AF5bLxX1vEJsjmRmx"
    host_behind.host_key_fingerprint = "SHA256:recorded"
    host_behind.save()
    probe_and_record(host_behind)
    host_behind.refresh_from_db()
    assert host_behind.status == Host.Status.HOST_KEY_CHANGED
    assert events("host.") == [("system", "host.key_changed", "node-7")]
    assert AuditEvent.objects.get().detail["recorded_fingerprint"] == "SHA256:recorded"


def test_an_admin_sign_in_is_logged_and_a_user_sign_in_is_not(client, admin_user, owner):
    client.post("/accounts/login/", {"username": "owner", "password": "pw-owner-1"})
    client.post("/admin/login/", {"username": "boss", "password": "pw-boss-1"})
    assert events("admin.") == [("boss", "admin.login", "boss")]
    assert AuditEvent.objects.get().detail["address"] == "127.0.0.1"


def test_a_failed_sign_in_is_logged_without_the_password(client, owner):
    client.post(
        "/accounts/login/",
        {"username": "owner", "password": "not-it-9"},
        HTTP_X_FORWARDED_FOR="198.51.100.4",
    )
    event = AuditEvent.objects.get(action="login.failed")
    assert (event.actor_name, event.target) == ("system", "owner")
    # No proxy is configured (NUM_PROXIES=0): the forged header is not the client's address.
    assert event.detail == {"username": "owner", "address": "127.0.0.1"}
    assert "not-it-9" not in str(event.detail)
