"""The guided New job form: command, where, values, when. Each path makes what it says (a
job on picked or placed GPUs, started now, at a set time or by hand; queued jobs that wait
for free GPUs), bad input is refused under the field it concerns and makes nothing, and
every signed-in user may use it with their own GPUs and groups.

The lab is the queue tests' one: hosts as their latest probes describe them (no SSH: a
start asked now is claimed and handed to the workers, never run here)."""

from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEvent
from jobs.models import Job, Task, TaskAction
from queueing.models import QueuedJob, QueuedTask, QueueQuota
from tests.queueing.conftest import lab, reserve, soon  # noqa: F401  (fixtures)

NEW = reverse("job-new")


def post(client, user, **fields):
    client.force_login(user)
    return client.post(NEW, {"template": "python train.py", **fields})


def shown_with(html: str, field: str) -> str:
    """What the page shows with one field: its block (label, input, help, errors)."""
    if field == "devices":
        start = html.index('id="gpu-picker"')
        return unescape(html[start : html.index("</fieldset>", start)])
    fieldset = f'<fieldset class="mb-3" id="id_{field}">'
    if fieldset in html:
        start = html.index(fieldset)
        return unescape(html[start : html.index("</fieldset>", start)])
    start = html.index(f'for="id_{field}"')
    return unescape(html[start : html.index("\n</div>", start)])


def error_under(response, field: str) -> str:
    """The errors shown under ``field`` (the text after each error marker in its block)."""
    block = shown_with(response.content.decode(), field)
    marker = 'class="error small" role="alert">'
    return " ".join(part.split("</div>")[0] for part in block.split(marker)[1:])


def nothing_made():
    return not Job.objects.exists() and not QueuedJob.objects.exists()


# --- the empty form ---------------------------------------------------------------------------


def test_the_form_opens_on_one_gpu_anywhere_started_when_free(client, owner, lab):  # noqa: F811
    lab.host("node-1", gpus=2)
    client.force_login(owner)
    html = client.get(NEW).content.decode()
    steps = ["1. What to run", "2. Where", "3. With which values", "4. When"]
    assert [html.index(step) for step in steps] == sorted(html.index(step) for step in steps)
    assert 'value="one_host" id="id_where_0" required checked' in html
    assert 'name="gpu_count" value="1"' in html
    assert 'value="queue" id="id_when_0" required checked' in html
    assert "Queue it</button>" in html
    assert "Write {name} where a value from step 3 goes" in shown_with(html, "template")
    assert "Right now you can start on 2 of the 2 GPUs" in html


def test_the_picker_says_on_which_gpus_you_may_start_now(client, owner, other_user, lab):  # noqa: F811
    node = lab.host("node-1", gpus=2)
    reserve(other_user, [lab.gpu(node, 1)], soon(-5), soon(60))
    client.force_login(owner)
    picker = shown_with(client.get(NEW).content.decode(), "devices")
    free, taken = (picker.split(f'data-gpu="{lab.gpu(node, i).pk}"')[1] for i in (0, 1))
    assert '"1">✓ you can start here now' in free.split("</label>")[0]
    assert "not for you now: GPU 1 on node-1 reserved by other until" in taken.split("</label>")[0]


def test_a_link_presets_where_and_when(client, owner, lab):  # noqa: F811
    node = lab.host("node-1", gpus=2)
    gpu = lab.gpu(node, 1)
    client.force_login(owner)
    html = client.get(f"{NEW}?where=devices&devices={gpu.pk}&when=now").content.decode()
    assert 'value="devices" id="id_where_2" required checked' in html
    assert 'value="now" id="id_when_1" required checked' in html
    assert "Create and start</button>" in html
    assert f'value="{gpu.pk}" checked' in shown_with(html, "devices")
    nonsense = client.get(f"{NEW}?where=everywhere&devices=x&when=1")
    assert nonsense.status_code == 200 and nothing_made()  # shown, checked only when sent


# --- the queue: "as soon as the GPUs are free" --------------------------------------------------


def test_the_defaults_queue_one_gpu_named_after_the_command(client, owner, lab):  # noqa: F811
    response = post(client, owner, where="one_host", gpu_count="1", when="queue", priority="0")
    assert response.status_code == 302 and response.url == reverse("queue")
    queued = QueuedJob.objects.get()
    task = queued.tasks.get()
    assert queued.name == "python train.py" and queued.priority == 0
    assert (task.kind, task.gpu_count, task.host, task.template) == (
        QueuedTask.Kind.ONE_HOST,
        1,
        None,
        "python train.py",
    )
    assert AuditEvent.objects.filter(action="queue.enqueue", actor=owner).exists()
    assert not Job.objects.exists()


def test_a_sweep_is_queued_as_one_job_per_combination(client, owner, lab):  # noqa: F811
    node = lab.host("node-1", gpus=4)
    response = post(
        client,
        owner,
        name="sweep",
        template="python train.py --lr {lr} --bs {bs}",
        values="lr: 0.1, 0.01\nbs: 32, 64",
        env="SEED=1",
        where="one_host",
        gpu_count="2",
        host=node.pk,
        gpu_model="A100",
        when="queue",
        priority="0",
        requeue_on_preemption="on",
    )
    assert response.status_code == 302
    jobs = list(QueuedJob.objects.order_by("pk"))
    assert [j.name for j in jobs] == [f"sweep ({n} of 4)" for n in range(1, 5)]
    tasks = [j.tasks.get() for j in jobs]
    assert [t.parameters for t in tasks] == [
        {"lr": "0.1", "bs": "32"},
        {"lr": "0.1", "bs": "64"},
        {"lr": "0.01", "bs": "32"},
        {"lr": "0.01", "bs": "64"},
    ]
    assert {(t.gpu_count, t.host, t.gpu_model, str(t.env)) for t in tasks} == {
        (2, node, "A100", "{'SEED': '1'}")
    }
    assert all(j.requeue_on_preemption for j in jobs)


def test_picked_gpus_are_queued_as_these_gpus(client, owner, lab):  # noqa: F811
    node = lab.host("node-1", gpus=2)
    gpus = [lab.gpu(node, 0), lab.gpu(node, 1)]
    devices = [g.pk for g in gpus]
    response = post(client, owner, where="devices", devices=devices, when="queue", gpu_count="1")
    assert response.status_code == 302
    task = QueuedJob.objects.get().tasks.get()
    assert task.kind == QueuedTask.Kind.DEVICES and list(task.devices.order_by("pk")) == gpus


def test_n_gpus_anywhere_ignore_a_host_and_the_ticked_gpus(client, owner, lab):  # noqa: F811
    node = lab.host("node-1", gpus=2)
    response = post(
        client,
        owner,
        where="any_hosts",
        gpu_count="3",
        host=node.pk,
        devices=[lab.gpu(node, 0).pk],
        when="queue",
        priority="0",
    )
    assert response.status_code == 302
    task = QueuedJob.objects.get().tasks.get()
    assert (task.kind, task.gpu_count, task.host, task.devices.count()) == (
        QueuedTask.Kind.ANY_HOSTS,
        3,
        None,
        0,
    )


# --- a job: now, at a set time, by hand ----------------------------------------------------------


def test_picked_gpus_by_hand_make_pending_tasks_on_them(client, owner, lab):  # noqa: F811
    node = lab.host("node-1", gpus=2)
    gpu = lab.gpu(node, 1)
    response = post(
        client,
        owner,
        name="by hand",
        template="train --lr {lr}",
        values="lr: 0.1, 0.01, 0.001",
        where="devices",
        devices=[gpu.pk],
        gpu_count="1",
        when="hand",
    )
    job = Job.objects.get(name="by hand")
    assert response.status_code == 302 and response.url == reverse("job-detail", args=[job.pk])
    tasks = list(job.tasks.order_by("pk"))
    assert [t.command for t in tasks] == ["train --lr 0.1", "train --lr 0.01", "train --lr 0.001"]
    assert all(t.host == node and list(t.devices.all()) == [gpu] for t in tasks)
    assert {t.status for t in tasks} == {Task.Status.PENDING}
    assert not QueuedJob.objects.exists()


def test_a_host_alone_makes_a_task_without_gpus(client, owner, lab):  # noqa: F811
    node = lab.host("node-1", gpus=1)
    response = post(client, owner, where="devices", host=node.pk, gpu_count="1", when="hand")
    assert response.status_code == 302
    task = Task.objects.get()
    assert task.host == node and not task.devices.exists()


def test_at_a_set_time_the_tasks_are_scheduled(client, owner, lab):  # noqa: F811
    node = lab.host("node-1", gpus=1)
    start = timezone.localtime() + timedelta(hours=2)
    response = post(
        client,
        owner,
        where="devices",
        devices=[lab.gpu(node, 0).pk],
        gpu_count="1",
        when="at",
        scheduled_start=start.strftime("%Y-%m-%dT%H:%M"),
        scheduled_stop=(start + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
    )
    assert response.status_code == 302
    task = Task.objects.get()
    assert task.scheduled_start == start.replace(second=0, microsecond=0)
    assert task.scheduled_stop - task.scheduled_start == timedelta(hours=1)
    assert "it starts at the time you set" in client.get(response.url).content.decode()


def test_now_on_picked_gpus_hands_the_start_to_the_workers(client, owner, lab):  # noqa: F811
    node = lab.host("node-1", gpus=1)
    response = post(
        client, owner, where="devices", devices=[lab.gpu(node, 0).pk], gpu_count="1", when="now"
    )
    assert response.status_code == 302
    task = Task.objects.get()
    assert task.status == Task.Status.STARTING and task.unix_username == "owner"
    assert TaskAction.objects.get(task=task).action == "spawn"


def test_now_with_n_gpus_takes_the_best_fitting_usable_host(client, owner, lab):  # noqa: F811
    lab.host("node-1", gpus=4)
    small = lab.host("node-2", gpus=2)
    response = post(client, owner, where="one_host", gpu_count="2", when="now")
    assert response.status_code == 302
    task = Task.objects.get()
    assert task.host == small and task.devices.count() == 2
    assert task.status == Task.Status.STARTING


# --- refusals: under the field they concern, nothing made -----------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"template": "python train.py {lr"}, "template", "The template is not valid"),
        ({"template": 'python -c "print({x})"', "values": "x: 1"}, "template", "inside quotes"),
        ({"template": "train {lr}"}, "values", "No value for {lr}"),
        ({"values": "lr 0.1"}, "values", "Line 1: write 'name: value1, value2'"),
        ({"template": "t {a}", "values": "a: 1, 2", "samples": "0"}, "samples", "greater than"),
        ({"env": "1BAD=x"}, "env", "not a valid environment variable name"),
        ({"gpu_count": "0"}, "gpu_count", "greater than or equal to 1"),
        ({"gpu_count": "65"}, "gpu_count", "less than or equal to 64"),
        ({"where": "everywhere"}, "where", "Select a valid choice"),
        ({"when": "at"}, "when", "needs GPUs you pick on the list"),
        ({"when": "hand"}, "when", "needs GPUs you pick on the list"),
        ({"priority": "50"}, "priority", "Priority must be between -100 and 0"),
        ({"min_memory_mib": str(2**31)}, "min_memory_mib", "less than or equal to"),
    ],
)
def test_bad_input_is_refused_under_its_field(client, owner, lab, fields, field, words):  # noqa: F811
    lab.host("node-1", gpus=1)
    data = {"where": "one_host", "gpu_count": "1", "when": "queue", "priority": "0", **fields}
    response = post(client, owner, **data)
    assert response.status_code == 400
    assert words in error_under(response, field)
    assert nothing_made()


def test_picked_gpus_are_refused_when_none_or_on_two_hosts(client, owner, lab):  # noqa: F811
    one, two = lab.host("node-1", gpus=1), lab.host("node-2", gpus=1)
    both = [lab.gpu(one, 0).pk, lab.gpu(two, 0).pk]
    nothing = post(client, owner, where="devices", gpu_count="1", when="hand")
    assert "Tick the GPUs to use, or choose a host" in error_under(nothing, "devices")
    queued = post(client, owner, where="devices", gpu_count="1", when="queue", priority="0")
    assert "Name at least one GPU" in error_under(queued, "devices")
    split = post(client, owner, where="devices", devices=both, gpu_count="1", when="hand")
    assert "must be on one host" in error_under(split, "devices")
    other_host = post(
        client,
        owner,
        where="devices",
        devices=[lab.gpu(two, 0).pk],
        host=one.pk,
        gpu_count="1",
        when="hand",
    )
    assert "is not on host node-1" in error_under(other_host, "devices")
    assert {r.status_code for r in (nothing, queued, split, other_host)} == {400}
    assert nothing_made()


def test_times_that_do_not_fit_are_refused(client, owner, lab):  # noqa: F811
    node = lab.host("node-1", gpus=1)
    picked = {"where": "devices", "devices": [lab.gpu(node, 0).pk], "gpu_count": "1"}
    no_start = post(client, owner, when="at", **picked)
    assert "Say when it starts" in error_under(no_start, "scheduled_start")
    start = timezone.localtime() + timedelta(hours=2)
    backwards = post(
        client,
        owner,
        when="at",
        scheduled_start=start.strftime("%Y-%m-%dT%H:%M"),
        scheduled_stop=(start - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
        **picked,
    )
    assert "stop must come after the scheduled start" in error_under(backwards, "scheduled_stop")
    assert nothing_made()


def test_now_on_a_gpu_someone_else_reserved_says_why(client, owner, other_user, lab):  # noqa: F811
    node = lab.host("node-1", gpus=1)
    reserve(other_user, [lab.gpu(node, 0)], soon(-5), soon(60))
    picked = post(
        client, owner, where="devices", devices=[lab.gpu(node, 0).pk], gpu_count="1", when="now"
    )
    assert picked.status_code == 400
    assert "GPU 0 on node-1 reserved by other until" in error_under(picked, "devices")
    placed = post(client, owner, where="one_host", gpu_count="1", when="now")
    assert placed.status_code == 400
    said = error_under(placed, "where")
    assert said.startswith("1 GPU is not usable now on one host (0 of the 1 that fit are): ")
    assert "reserved by other" in said and "As soon as the GPUs are free" in said
    assert nothing_made()


def test_now_refuses_a_spread_over_hosts(client, owner, lab):  # noqa: F811
    lab.host("node-1", gpus=1), lab.host("node-2", gpus=1)
    response = post(client, owner, where="any_hosts", gpu_count="2", when="now")
    assert response.status_code == 400
    assert "No single host has 2 GPUs you can use now" in error_under(response, "where")
    assert nothing_made()


def test_a_group_one_is_not_in_cannot_be_chosen(client, owner, other_user, lab):  # noqa: F811
    theirs = Group.objects.create(name="theirs")
    other_user.groups.add(theirs)
    QueueQuota.objects.create(group=theirs, max_gpus=8, max_priority=50)
    response = post(client, owner, where="one_host", gpu_count="1", when="queue", group=theirs.pk)
    assert response.status_code == 400
    assert "Select a valid choice" in error_under(response, "group")
    assert nothing_made()


def test_a_group_with_a_higher_limit_allows_its_priority(client, owner, lab):  # noqa: F811
    mine = Group.objects.create(name="mine")
    owner.groups.add(mine)
    QueueQuota.objects.create(group=mine, max_gpus=8, max_priority=50)
    response = post(
        client, owner, where="one_host", gpu_count="1", when="queue", group=mine.pk, priority="50"
    )
    assert response.status_code == 302
    assert (QueuedJob.objects.get().priority, QueuedJob.objects.get().group) == (50, mine)


# --- who may use it ---------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_sign_in_and_nothing_is_made(client, lab):  # noqa: F811
    for url in (NEW, reverse("job-rows"), reverse("job-grid")):
        response = client.get(url, follow=True)
        assert response.redirect_chain[-1][0].startswith(reverse("login")), url
    assert client.post(NEW, {"template": "true", "when": "queue"}).status_code == 302
    assert nothing_made()


@pytest.mark.parametrize("persona", ["owner", "other_user", "admin_user"])
def test_every_signed_in_user_makes_their_own(client, lab, persona, request):  # noqa: F811
    # A creation form shows no one's data but the user's own GPUs' states and groups; what
    # it makes is owned by whoever sent it (an admin queues as themselves, never as others).
    user = request.getfixturevalue(persona)
    client.force_login(user)
    assert client.get(NEW).status_code == 200
    assert client.get(reverse("job-rows")).status_code == 200
    assert post(client, user, when="queue", where="one_host", gpu_count="1").status_code == 302
    assert QueuedJob.objects.get().owner == user


def test_the_usable_gpus_are_each_users_own(client, owner, other_user, lab):  # noqa: F811
    node = lab.host("node-1", gpus=1)
    reserve(owner, [lab.gpu(node, 0)], soon(-5), soon(60))  # the owner's own booking
    client.force_login(owner)
    assert "Right now you can start on 1 of the 1 GPU;" in client.get(NEW).content.decode()
    client.force_login(other_user)
    assert "Right now you can start on 0 of the 1 GPU;" in client.get(NEW).content.decode()


def test_old_addresses_lead_to_the_guided_form(client, owner):
    client.force_login(owner)
    response = client.get(reverse("job-grid"))
    assert response.status_code == 302 and response.url == NEW
