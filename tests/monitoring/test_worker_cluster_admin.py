"""Worker clusters in the admin: where a restart's reason is shown; read-only, staff only."""

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from monitoring.models import WorkerCluster

pytestmark = pytest.mark.django_db
PAGES = ["/admin/monitoring/workercluster/", "/admin/monitoring/workercluster/{pk}/change/"]


@pytest.fixture
def cluster():
    now = timezone.now()
    return WorkerCluster.objects.create(
        name="vm:4242",
        started_at=now,
        last_check_at=now,
        restarts=1,
        last_restart_at=now,
        last_restart_reason="no task finished for 31s while work was due and 2 of 3 were free",
    )


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("persona", ["anonymous", "owner", "other_user"])
def test_people_who_are_not_staff_are_sent_to_sign_in(client, cluster, persona, page, request):
    if persona != "anonymous":
        client.force_login(request.getfixturevalue(persona))
    response = client.get(page.format(pk=cluster.pk))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_staff_without_the_view_permission_are_refused(client, cluster, owner):
    owner.is_staff = True
    owner.save()
    client.force_login(owner)
    assert client.get(PAGES[0]).status_code == 403
    owner.user_permissions.add(Permission.objects.get(codename="view_workercluster"))
    assert client.get(PAGES[0]).status_code == 200


def test_admins_see_the_restart_and_why_and_cannot_change_it(client, cluster, admin_user):
    client.force_login(admin_user)
    listing = client.get(PAGES[0]).content.decode()
    assert "vm:4242" in listing and "no task finished for 31s" in listing
    page = client.get(PAGES[1].format(pk=cluster.pk))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()  # read-only
    assert client.post(PAGES[1].format(pk=cluster.pk), {"restarts": 0}).status_code == 403
    assert client.get("/admin/monitoring/workercluster/add/").status_code == 403
    cluster.refresh_from_db()
    assert cluster.restarts == 1
