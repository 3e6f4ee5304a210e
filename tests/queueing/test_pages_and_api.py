"""The queue page and /api/queued-jobs/: who sees, queues and cancels what; bad input."""

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from queueing.models import QueuedJob
from queueing.scheduler import plan_round, save_reasons

from .conftest import queue, reserve, soon

PAGE, API, NEW = "/queue/", "/api/queued-jobs/", "/jobs/new/"


@pytest.fixture
def waiting(lab, owner, other_user):
    """owner's job waits for node-1, which other has reserved from soon on."""
    node = lab.host("node-1", gpus=1)
    reserve(other_user, [lab.gpu(node, 0)], soon(20), soon(200))
    job = queue(owner, "night run", {"gpu_count": 1, "template": "python train.py"})
    now = timezone.now()
    save_reasons(plan_round(now).waiting, now)
    job.refresh_from_db()
    return job


# --- anonymous ---------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_sign_in(client, waiting):
    assert client.get(PAGE).status_code == 302
    assert client.post(f"/queue/{waiting.pk}/cancel").status_code == 302
    assert client.get(API).status_code == 403
    assert client.post(API, {}, content_type="application/json").status_code == 403
    assert client.post(f"{API}{waiting.pk}/cancel/").status_code == 403
    assert QueuedJob.objects.get().state == QueuedJob.State.WAITING


# --- the owner ---------------------------------------------------------------------------------


def test_the_owner_sees_the_place_and_why_it_waits(client, owner, waiting):
    client.force_login(owner)
    page = client.get(PAGE).content.decode()
    assert "night run" in page and "1 job waiting in all" in page
    assert "1 GPU on one host" in page
    assert "GPU 0 on node-1 reserved by other from" in page
    data = client.get(API).json()
    assert [(j["name"], j["position"], j["state"]) for j in data] == [("night run", 1, "waiting")]
    assert data[0]["reasons"] == waiting.reasons and data[0]["owner"] == "owner"


def test_the_owner_queues_from_the_new_job_form(client, owner, lab):
    client.force_login(owner)
    response = client.post(
        NEW,
        {
            "name": "from the form",
            "template": "python train.py --epochs 90",
            "env": "SEED=1",
            "where": "one_host",
            "gpu_count": "2",
            "gpu_model": "A100",
            "when": "queue",
            "priority": "0",
            "requeue_on_preemption": "on",
        },
    )
    assert response.status_code == 302 and response.url == PAGE
    job = QueuedJob.objects.get()
    task = job.tasks.get()
    assert (task.gpu_count, task.gpu_model, task.env) == (2, "A100", {"SEED": "1"})
    assert job.requeue_on_preemption and not job.opportunistic
    assert AuditEvent.objects.filter(action="queue.enqueue", actor=owner).exists()
    assert "Queued &#x27;from the form&#x27;" in client.get(PAGE).content.decode()


def test_bad_input_on_the_form_says_why_and_queues_nothing(client, owner, lab):
    client.force_login(owner)
    queued = {"name": "x", "where": "one_host", "gpu_count": "1", "when": "queue"}
    response = client.post(NEW, {**queued, "template": "python train.py {lr", "priority": "0"})
    assert response.status_code == 400
    assert "The template is not valid" in response.content.decode()
    response = client.post(NEW, {**queued, "template": "true", "priority": "50"})
    assert response.status_code == 400 and "Priority must be between" in response.content.decode()
    assert not QueuedJob.objects.exists()


def test_the_page_lists_and_no_longer_takes_a_form(client, owner, lab):
    client.force_login(owner)
    page = client.get(PAGE).content.decode()
    assert f'href="{NEW}">Queue a job</a>' in page and 'name="template"' not in page
    assert client.post(PAGE, {"name": "x", "template": "true"}).status_code == 405
    assert not QueuedJob.objects.exists()


def test_the_owner_queues_and_cancels_through_the_api(client, owner, lab):
    node = lab.host("node-1", gpus=2)
    client.force_login(owner)
    response = client.post(
        API,
        {
            "name": "api job",
            "tasks": [
                {"template": "python a.py", "kind": "devices", "devices": [lab.gpu(node, 0).pk]},
                {"template": "python b.py --lr {lr}", "parameters": {"lr": "0.1"}, "gpu_count": 1},
            ],
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["position"] == 1 and [t["kind"] for t in body["tasks"]] == ["devices", "one_host"]
    assert client.post(f"{API}{body['id']}/cancel/").json()["state"] == "cancelled"
    again = client.post(f"{API}{body['id']}/cancel/")
    assert again.status_code == 400 and "already ended" in again.json()["detail"]


def test_bad_api_input_is_a_400_with_a_reason(client, owner, lab):
    node1, node2 = lab.host("node-1", gpus=1), lab.host("node-2", gpus=1)
    client.force_login(owner)
    two_hosts = {
        "name": "x",
        "tasks": [
            {
                "template": "true",
                "kind": "devices",
                "devices": [lab.gpu(node1, 0).pk, lab.gpu(node2, 0).pk],
            }
        ],
    }
    response = client.post(API, two_hosts, content_type="application/json")
    assert response.status_code == 400 and "must be on one host" in response.json()["detail"]
    for bad in (
        {"name": "x", "tasks": []},
        {"name": "x", "tasks": [{"template": "true", "gpu_count": 0}]},
        {"name": "x", "tasks": [{"template": "true", "kind": "everything"}]},
    ):
        assert client.post(API, bad, content_type="application/json").status_code == 400
    assert not QueuedJob.objects.exists()


# --- another user and the admin -----------------------------------------------------------------


def test_another_user_neither_sees_nor_cancels_it(client, other_user, waiting):
    client.force_login(other_user)
    page = client.get(PAGE).content.decode()
    assert "night run" not in page and "1 job waiting in all" in page
    assert client.get(API).json() == []
    assert client.get(f"{API}{waiting.pk}/").status_code == 404
    assert client.post(f"{API}{waiting.pk}/cancel/").status_code == 404
    assert client.delete(f"{API}{waiting.pk}/").status_code == 404
    assert client.post(f"/queue/{waiting.pk}/cancel").status_code == 404
    assert QueuedJob.objects.get().state == QueuedJob.State.WAITING


def test_an_admin_sees_all_and_may_cancel(client, admin_user, waiting):
    client.force_login(admin_user)
    page = client.get(PAGE).content.decode()
    assert "night run" in page and "owner" in page
    assert [j["id"] for j in client.get(API).json()] == [waiting.pk]
    assert client.get("/admin/queueing/queuedjob/").status_code == 200
    assert client.get(f"/admin/queueing/queuedjob/{waiting.pk}/change/").status_code == 200
    assert client.post(f"/queue/{waiting.pk}/cancel").status_code == 302
    assert QueuedJob.objects.get().state == QueuedJob.State.CANCELLED
    assert AuditEvent.objects.filter(action="queue.cancel", actor=admin_user).exists()


def test_an_admin_cancels_from_the_admin_list(client, admin_user, waiting):
    client.force_login(admin_user)
    url = "/admin/queueing/queuedjob/"
    cancel = {"action": "cancel", "_selected_action": [waiting.pk]}
    assert "1 queued job(s) cancelled" in client.post(url, cancel, follow=True).content.decode()
    assert QueuedJob.objects.get().state == QueuedJob.State.CANCELLED
    again = client.post(url, cancel, follow=True).content.decode()
    assert "Night run: &#x27;night run&#x27; has already ended (Cancelled)." in again


def test_the_owner_cancels_from_the_page(client, owner, waiting):
    client.force_login(owner)
    assert client.post(f"/queue/{waiting.pk}/cancel").status_code == 302
    assert QueuedJob.objects.get().state == QueuedJob.State.CANCELLED
    assert (
        "already ended" in client.post(f"/queue/{waiting.pk}/cancel", follow=True).content.decode()
    )


def test_the_owner_does_not_reach_the_quota_admin(client, owner, waiting):
    client.force_login(owner)
    assert client.get("/admin/queueing/queuequota/").status_code == 302


def test_the_page_lists_the_latest_ended_jobs(client, owner):
    for i in range(25):
        QueuedJob.objects.create(owner=owner, name=f"done-{i:02}", state=QueuedJob.State.FINISHED)
    client.force_login(owner)
    page = client.get(PAGE).content.decode()
    assert "done-24" in page and "done-05" in page and "done-04" not in page


@pytest.mark.parametrize("half_life, said", [(168, "then fair share"), (0, "then first come")])
def test_the_page_says_how_the_queue_orders(client, owner, waiting, settings, half_life, said):
    """Fair share orders equals where it is on (the default); without it, arrival does."""
    settings.QUEUE_FAIRSHARE_HALF_LIFE_HOURS = half_life
    client.force_login(owner)
    page = " ".join(client.get("/queue/").content.decode().split())
    assert f"guaranteed jobs before opportunistic ones, then higher priority, {said}" in page
    assert ("fair share" in page) == bool(half_life)
