"""The start rule as a table: each reason alone and some together, asked through every door
(the rule itself, a job's start, the queue, gpurun, the placement API, `hive status --free`),
which must all agree."""

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.utils import timezone

from accesscontrol.models import Ban
from accesscontrol.services import profile_for
from allocation.rule import CODES, may_start
from jobs import services as job_services
from jobs.models import Task
from monitoring.models import Device, Host
from queueing.gpurun import Runner
from queueing.models import GpuClaim, QueuedJob, QueueRun
from queueing.scheduler import plan_round

from .conftest import map_to_own_name, queue, reserve, soon


def no_grant(case):
    Group.objects.get(name="everyone").user_set.remove(case.owner)


def banned(case):
    Ban.objects.create(user=case.owner, reason="misuse", created_by=case.other)


def reserved_now(case):
    reserve(case.other, [case.gpu], soon(-5), soon(60))


def reserved_soon(case):
    reserve(case.other, [case.gpu], soon(10), soon(60))


def foreign_process(case):
    case.lab.busy(case.host, 0, pid=4242, user="carol")
    case.seen = f"{case.gpu.uuid}, 4242, 100, python\n"  # what gpurun's nvidia-smi shows


def held_by_task(case):
    spec = job_services.TaskSpec(host=case.host, template="sleep 1", devices=[case.gpu])
    job = job_services.create_job(case.other, name="theirs", specs=[spec])
    job.tasks.update(status=Task.Status.RUNNING)


def held_by_queue_run(case):
    """Claimed by a queue round, its task not started yet."""
    queued = queue(case.other, "claimed")
    spec = job_services.TaskSpec(host=case.host, template="sleep 1", devices=[case.gpu])
    job = job_services.create_job(case.other, name="claimed", specs=[spec])
    run = QueueRun.objects.create(queued_job=queued, job=job, gpus=1)
    GpuClaim.objects.create(device=case.gpu, run=run)
    QueuedJob.objects.filter(pk=queued.pk).update(state=QueuedJob.State.STARTING)


def host_down(case):
    Host.objects.filter(pk=case.host.pk).update(status=Host.Status.UNREACHABLE)


def gpu_lost(case):
    Device.objects.filter(pk=case.gpu.pk).update(status=Device.Status.LOST)


def no_account(case):
    # This machine reached without SSH, and an account that does not exist on it.
    Host.objects.filter(pk=case.host.pk).update(transport=Host.Transport.LOCAL)
    profile = profile_for(case.owner)
    profile.unix_username = "gpuhive-no-such-account"
    profile.save()


def stale_probe(case):
    spec = job_services.TaskSpec(host=case.host, template="true", devices=[case.gpu])
    job = job_services.create_job(case.owner, name="earlier", specs=[spec])
    later = timezone.now() + timedelta(seconds=1)  # ended after the host's latest probe
    job.tasks.update(status=Task.Status.EXITED, exit_code=0, ended_at=later)


CASES = {
    "free": ([], set()),
    "no grant": ([no_grant], {"no_grant"}),
    "banned": ([banned], {"banned"}),
    "reserved now": ([reserved_now], {"reserved_by_other"}),
    "reserved soon": ([reserved_soon], {"reserved_by_other"}),
    "foreign process": ([foreign_process], {"foreign_process"}),
    "held by a task": ([held_by_task], {"held_by_task"}),
    "held by a queue run": ([held_by_queue_run], {"held_by_queue_run"}),
    "host down": ([host_down], {"host_down"}),
    "gpu lost": ([gpu_lost], {"gpu_lost"}),
    "no account": ([no_account], {"no_account"}),
    "stale probe": ([stale_probe], {"stale_probe"}),
    "banned, reserved and busy": (
        [banned, reserved_now, foreign_process],
        {"banned", "reserved_by_other", "foreign_process"},
    ),
    "no grant, held by a task and by the queue": (
        [no_grant, held_by_task, held_by_queue_run],
        {"no_grant", "held_by_task", "held_by_queue_run"},
    ),
    "down, no account and reserved soon": (
        [host_down, no_account, reserved_soon],
        {"host_down", "no_account", "reserved_by_other"},
    ),
}


class Case:
    def __init__(self, lab, owner, other):
        self.lab, self.owner, self.other = lab, owner, other
        self.host = lab.host("node-1", gpus=1)
        self.gpu = lab.gpu(self.host, 0)
        self.seen = ""  # nvidia-smi shows nothing
        for user in (owner, other):
            profile = profile_for(user)
            profile.unix_username = user.get_username()  # an ordinary account (issue 15)
            profile.save()

    def codes(self) -> set[str]:
        return {r.code for r in may_start(self.owner, [self.gpu])}


@pytest.fixture(params=list(CASES), ids=list(CASES))
def case(request, lab, owner, other_user):
    steps, expected = CASES[request.param]
    case = Case(lab, owner, other_user)
    for step in steps:
        step(case)
    case.expected = expected
    return case


def test_the_rule_gives_every_reason_with_its_code(case):
    reasons = may_start(case.owner, [case.gpu])
    assert {r.code for r in reasons} == case.expected
    assert all(r.code in CODES and r.text and r.device_id == case.gpu.pk for r in reasons)


def test_a_jobs_start_refuses_with_the_same_reasons(case):
    spec = job_services.TaskSpec(host=case.host, template="true", devices=[case.gpu])
    task = job_services.create_job(case.owner, name="mine", specs=[spec]).tasks.get()
    texts = [r.text for r in may_start(case.owner, [case.gpu])]
    if not case.expected:
        job_services.check_can_start(task, timezone.now())  # allowed: nothing raised
        return
    with pytest.raises(ValidationError) as refused:
        job_services.spawn_task(task, case.owner)
    assert refused.value.messages == texts
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING  # nothing changed


def test_the_queue_agrees(case):
    queued = queue(case.owner, "queued", {"kind": "devices", "devices": [case.gpu]})
    plan = plan_round(timezone.now())
    placed = [q.pk for q, _ in plan.starts]
    assert (queued.pk in placed) == (not case.expected)
    if case.expected:
        first = may_start(case.owner, [case.gpu])[0].text
        assert first in plan.waiting[queued.pk]


def test_gpurun_agrees(case):
    runner = Runner(host=case.host, owner=case.owner, devices=[case.gpu], out=io.StringIO())
    why, _ = runner.look(case.gpu, seen=case.seen)
    # gpurun asks nvidia-smi itself: a probe's age does not matter to it.
    assert bool(why) == bool(case.expected - {"stale_probe"})
    if why and "foreign_process" not in case.expected:
        assert why == may_start(case.owner, [case.gpu])[0].text


def test_the_placement_api_agrees(case, client):
    client.force_login(case.owner)
    rows = {row["id"]: row for row in client.get("/api/placement/").json()}
    if "gpu_lost" in case.expected:
        assert case.gpu.pk not in rows  # only present GPUs are listed
    else:
        assert {r["code"] for r in rows[case.gpu.pk]["reasons"]} == case.expected
        assert rows[case.gpu.pk]["usable"] == (not case.expected)
    answer = client.post("/api/placement/", {"devices": [case.gpu.pk]}, "application/json")
    assert answer.status_code == 200
    body = answer.json()
    assert body["placed"] == (not case.expected)
    assert {r["code"] for r in body["reasons"]} == case.expected


# --- the placement endpoint: who may ask what ----------------------------------------------------

PLACEMENT = "/api/placement/"


def test_anonymous_visitors_may_not_ask_where_to_start(client, db):
    assert client.get(PLACEMENT).status_code == 403
    assert client.post(PLACEMENT, {}, "application/json").status_code == 403


def test_each_user_is_answered_for_themselves(client, lab, owner, other_user, admin_user):
    node = lab.host("node-1", gpus=2)
    reserve(other_user, [lab.gpu(node, 0)], soon(-5), soon(60))
    map_to_own_name(admin_user)  # mappings are explicit (issue 15)
    usable = {}
    for user in (owner, other_user, admin_user):
        client.force_login(user)
        usable[user.username] = [r["index"] for r in client.get(PLACEMENT).json() if r["usable"]]
    # The booking is the other user's: only they may start on GPU 0; the admin is no exception.
    assert usable == {"owner": [1], "other": [0, 1], "boss": [1]}


def test_a_request_is_placed_best_fit_or_refused_with_reasons(client, lab, owner, other_user):
    small, _ = lab.host("node-1", gpus=1), lab.host("node-2", gpus=4)
    client.force_login(owner)
    answer = client.post(PLACEMENT, {"count": 1}, "application/json").json()
    assert answer["placed"] and [g["host"] for g in answer["gpus"]] == ["node-1"]  # best fit
    lab.busy(small, 0)
    answer = client.post(PLACEMENT, {"count": 2, "host": small.pk}, "application/json").json()
    assert not answer["placed"] and answer["devices"] == []
    assert answer["detail"] == "There are not 2 GPUs on node-1 that fit the request."
    answer = client.post(PLACEMENT, {"count": 5, "spread": "any_hosts"}, "application/json")
    body = answer.json()
    assert not body["placed"] and [r["code"] for r in body["reasons"]] == ["foreign_process"]
    assert body["detail"] == "5 GPUs are not usable now across the hosts (4 of the 5 that fit are)."
    model = {"count": 1, "model": "H100"}
    assert client.post(PLACEMENT, model, "application/json").json()["placed"] is False


def test_bad_placement_requests_get_field_errors(client, lab, owner):
    lab.host("node-1", gpus=1)
    client.force_login(owner)
    for body, field in (
        ({"count": 0}, "count"),
        ({"spread": "everywhere"}, "spread"),
        ({"devices": [999]}, "devices"),
        ({"host": "node-1"}, "host"),
        ({"min_memory_mib": -1}, "min_memory_mib"),
    ):
        answer = client.post(PLACEMENT, body, "application/json")
        assert answer.status_code == 400, body
        assert field in answer.json() and answer.json()["detail"], body
