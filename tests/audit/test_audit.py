"""The audit log records who did what, and only superusers may read it (never edit it)."""

import pytest

from audit.log import record
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_record_keeps_actor_name_and_detail(owner):
    event = record("grant.changed", actor=owner, target="grant 3", users=[owner.pk])
    event.refresh_from_db()
    assert (event.actor, event.actor_name, event.action) == (owner, "owner", "grant.changed")
    assert event.detail == {"users": [owner.pk]}


def test_record_without_actor_is_the_system():
    assert record("process.killed", target="node-1 pid 42").actor_name == "system"


def test_name_survives_deleting_the_user(owner):
    event = record("job.run_as", actor=owner, target="task 1")
    owner.delete()
    event.refresh_from_db()
    assert event.actor is None and event.actor_name == "owner"


@pytest.mark.parametrize(
    "who, status", [(None, 302), ("owner", 302), ("staff", 403), ("boss", 200)]
)
def test_admin_changelist_permissions(client, owner, admin_user, django_user_model, who, status):
    staff = django_user_model.objects.create_user("staff", password="pw-staff-1", is_staff=True)
    record("user.banned", actor=admin_user, target="owner")
    users = {"owner": owner, "staff": staff, "boss": admin_user}
    if who:
        client.force_login(users[who])
    response = client.get("/admin/audit/auditevent/")
    assert response.status_code == status
    if status == 200:
        assert b"user.banned" in response.content


def test_admin_cannot_change_or_delete(client, admin_user):
    event = record("user.banned", actor=admin_user, target="owner")
    client.force_login(admin_user)
    client.post(f"/admin/audit/auditevent/{event.pk}/delete/", {"post": "yes"})
    assert AuditEvent.objects.filter(pk=event.pk).exists()
    assert client.get("/admin/audit/auditevent/add/").status_code == 403
