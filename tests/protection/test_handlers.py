"""Handlers: queued per cycle, each run recorded, failures isolated; mail, terminal, webhook."""

import json
import os
import pwd
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from core.models import Activity
from notifications.models import Channel, Delivery
from notifications.send import send_due
from protection.detection import check_hosts
from protection.handlers import ACTIVITY, Skip
from protection.handlers.kill import KillHandler
from protection.handlers.terminal import terminals, write_to_terminals
from protection.handlers.texts import sanitized, to_offender
from protection.models import HandlerRun, Violation

pytestmark = pytest.mark.django_db(transaction=True)

HERE = "tests.protection.test_handlers"
MAIL = "protection.handlers.email.EmailHandler"
NOTIFY = "protection.handlers.notify.NotifyHandler"
seen: list[int] = []


# --- a team's own handlers: this is all it takes ----------------------------------------------


def note_it(violation, **options):
    seen.append(violation.pid)
    return f"noted pid {violation.pid}"


def explode(violation, **options):
    raise RuntimeError("the chat server is on fire")


def sit_out(violation, **options):
    raise Skip("not today")


@pytest.fixture(autouse=True)
def _clean():
    seen.clear()


def intrude(probe, *processes, cycles=2):
    for _ in range(cycles):
        probe.saw(*processes)
        check_hosts([probe.host.pk])


def handlers(settings, *entries):
    settings.VIOLATION_HANDLERS = [
        e if isinstance(e, dict) else {"handler": e, "options": {}} for e in entries
    ]


def runs(handler):
    return list(HandlerRun.objects.filter(handler=handler).values_list("status", flat=True))


def test_a_raising_handler_is_recorded_and_stops_nothing_else(
    probe, booking, settings, tasks_run_inline
):
    handlers(settings, f"{HERE}.explode", f"{HERE}.note_it", f"{HERE}.sit_out")
    intrude(probe, (0, 10, "other", "a"), (0, 11, "other", "b"))
    assert Violation.objects.count() == 2
    assert runs(f"{HERE}.explode") == ["failed", "failed"]
    assert sorted(seen) == [10, 11] and runs(f"{HERE}.note_it") == ["done", "done"]
    assert runs(f"{HERE}.sit_out") == ["skipped", "skipped"]
    failed = HandlerRun.objects.filter(status="failed").first()
    assert failed.error == "RuntimeError: the chat server is on fire" and failed.finished_at
    assert "on fire" in Activity.objects.get(name=ACTIVITY).last_error
    # Detection goes on: the next cycle still updates the violations.
    intrude(probe, (0, 10, "other", "a"), cycles=1)
    assert Violation.objects.filter(ended_at=None).get().pid == 10


def test_a_handler_that_cannot_be_loaded_is_recorded_on_each_violation(
    probe, booking, settings, tasks_run_inline
):
    handlers(
        settings,
        {"handler": MAIL, "options": {"no_such_option": 1}},
        f"{HERE}.note_it",
    )
    intrude(probe, (0, 10, "other", "a"))
    assert "no_such_option" in HandlerRun.objects.get(handler=MAIL).error
    assert seen == [10]


def test_handlers_run_once_per_violation_unless_they_repeat(
    probe, booking, settings, tasks_run_inline
):
    handlers(
        settings,
        f"{HERE}.note_it",
        {"handler": f"{HERE}.sit_out", "options": {}, "repeat_seconds": 0},
    )
    intrude(probe, (0, 10, "other", "a"), cycles=5)
    assert runs(f"{HERE}.note_it") == ["done"]
    assert len(runs(f"{HERE}.sit_out")) == 4  # from the cycle that flagged it on


def test_handlers_are_queued_only_once_detection_committed(
    probe, booking, settings, django_capture_on_commit_callbacks
):
    handlers(settings, f"{HERE}.note_it")
    from django_q.brokers import get_broker

    broker = get_broker()
    before = broker.queue_size()
    intrude(probe, (0, 10, "other", "a"))
    assert broker.queue_size() == before + 1  # one task for the handler, not run inline
    assert seen == [] and not HandlerRun.objects.exists()


# --- e-mail (through the notifications app: each person's mail channels) -----------------


def mailed(smtp) -> list[list[str]]:
    """Send what the handlers recorded, as the notifications sender does; who got mail."""
    send_due()
    return smtp.to()


def test_mail_goes_to_the_offender_once_per_reservation_window(
    probe, booking, settings, tasks_run_inline, smtp
):
    handlers(settings, MAIL)
    intrude(probe, (0, 10, "other", "a"), (0, 11, "other", "b"), cycles=4)
    assert mailed(smtp) == [["other@example.org"]]
    text = smtp.text()
    assert "GPU 0 of node-1" in text and "reserved by owner" in text
    assert runs(MAIL) == ["done", "skipped"]
    assert Delivery.objects.get().event == "on_others_gpu"
    # A new intruder process after the window has passed is mailed again.
    HandlerRun.objects.update(
        started_at=HandlerRun.objects.get(status="done").started_at - timedelta(minutes=11)
    )
    intrude(probe, (0, 12, "other", "c"))
    assert len(mailed(smtp)) == 2


def test_mail_can_also_go_to_the_owner_and_the_admins(
    probe, booking, settings, admin_user, tasks_run_inline, smtp
):
    handlers(settings, {"handler": MAIL, "options": {"to_owner": True, "to_admins": True}})
    intrude(probe, (0, 10, "other", "a"))
    assert sorted(mailed(smtp)) == [
        ["boss@example.org"], ["other@example.org"], ["owner@example.org"]
    ]  # fmt: skip
    owners_copy = next(m for m in smtp.messages if m.rcpt_tos == ["owner@example.org"])
    assert "other (process 10" in owners_copy.content.decode()
    events = dict(Delivery.objects.values_list("channel__user__username", "event"))
    assert events == {"other": "on_others_gpu", "owner": "intruder", "boss": "intruder_admin"}
    assert HandlerRun.objects.get(handler=MAIL).outcome == "mailed other, owner, boss"


def test_mail_follows_each_persons_channels(
    probe, booking, settings, owner, other_user, tasks_run_inline, smtp
):
    """The owner chose another address; the offender wants no mail about this event."""
    handlers(settings, {"handler": MAIL, "options": {"to_owner": True}})
    Channel.objects.create(user=owner, kind="email", target="desk@lab.example.org")
    Channel.objects.create(user=other_user, kind="email", events=["job_ended"])
    intrude(probe, (0, 10, "other", "a"))
    assert mailed(smtp) == [["desk@lab.example.org"]]


def test_mail_and_notify_handlers_share_one_delivery_per_person(
    probe, booking, settings, tasks_run_inline, smtp
):
    """Both handlers mail the owner and the offender: one table, one mail each."""
    handlers(
        settings,
        {"handler": MAIL, "options": {"to_owner": True}},
        {"handler": NOTIFY, "options": {"with_mail": True}},
    )
    intrude(probe, (0, 10, "other", "a"))
    assert sorted(mailed(smtp)) == [["other@example.org"], ["owner@example.org"]]
    assert runs(MAIL) == ["done"] and runs(NOTIFY) == ["skipped"]  # told already


def test_mail_is_capped_per_cycle(
    probe, booking, settings, other_user, admin_user, tasks_run_inline, smtp
):
    handlers(settings, {"handler": MAIL, "options": {"max_per_cycle": 1}})
    intrude(probe, (0, 10, "other", "a"), (0, 11, "boss", "b"))
    assert len(mailed(smtp)) == 1
    assert sorted(runs(MAIL)) == ["done", "skipped"]
    assert "cap of 1" in HandlerRun.objects.get(status="skipped").outcome


def test_an_unknown_owner_is_not_mailed(probe, booking, settings, tasks_run_inline, smtp):
    handlers(settings, MAIL)
    intrude(probe, (0, 10, None, "a"))
    assert mailed(smtp) == [] and runs(MAIL) == ["skipped"]


# --- terminal message -----------------------------------------------------------------------


WHO = """\
other    pts/0        2026-03-01 09:12 (10.0.0.9)
owner    pts/1        2026-03-01 09:13 (10.0.0.8)
other    tty2         2026-03-01 08:00 (:0)
other    pts/0        2026-03-01 09:12 (10.0.0.9)
other    ../../etc/passwd 2026-03-01 09:12
"""


def test_the_offenders_terminals_come_from_who():
    assert terminals(WHO, "other") == ["pts/0", "tty2"]
    assert terminals(WHO, "nobody") == []


def test_the_text_for_terminals_has_no_control_characters(probe, booking, settings):
    settings.VIOLATION_HANDLERS = []
    intrude(probe, (0, 10, "other", "evil \x1b]0;pwned\x07\x1b[2J args\r"))
    text = to_offender(Violation.objects.get())
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert "evil ]0;pwned[2J args" in text
    assert sanitized("a\tb\x00c\x7fd\né") == "abcd\né"


def test_no_terminal_means_nothing_is_written(probe, booking, settings):
    """The host is this machine (local transport): the real `who`, no session of "other"."""
    settings.VIOLATION_HANDLERS = []
    probe.host.transport = "local"
    probe.host.save()
    intrude(probe, (0, 10, "other", "a"))
    with pytest.raises(Skip, match="other has no terminal open on node-1"):
        write_to_terminals(Violation.objects.get())


def test_an_unknown_owner_gets_no_terminal_message(probe, booking, settings):
    settings.VIOLATION_HANDLERS = []
    intrude(probe, (0, 10, "4711", "a"))
    with pytest.raises(Skip, match="owner unknown"):
        write_to_terminals(Violation.objects.get())


# --- processes in containers ----------------------------------------------------------------

TRAIN_3 = {"id": "b508e2673897", "name": "train-3", "runtime": "docker"}


def test_the_offender_is_told_which_container(probe, booking, settings):
    settings.VIOLATION_HANDLERS = []
    intrude(probe, (0, 10, "other", "python train.py", TRAIN_3))
    text = to_offender(Violation.objects.get())
    assert "your process 10 in container train-3 (python train.py)" in text


def test_a_labelled_containers_process_running_as_another_account_is_not_killed(
    probe, booking, settings, real_processes
):
    """The label names its owner; the process runs as the container's account (root, or
    this test's): not the offender's, so the kill handler cannot tell it from a reused PID."""
    settings.VIOLATION_HANDLERS = []
    probe.host.transport = "local"
    probe.host.save()
    process = real_processes(["sleep", "304"])
    intrude(probe, (0, process.pid, "other", "sleep 304", TRAIN_3))
    account = pwd.getpwuid(os.getuid()).pw_name
    with pytest.raises(Skip, match=rf"runs as {account} in other \(container train-3\)"):
        KillHandler().handle(Violation.objects.get())
    assert process.poll() is None


# --- the documented example: a chat webhook -------------------------------------------------


@pytest.fixture
def chat_server():
    """A real HTTP server on loopback that keeps what is posted to it."""
    posted = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            posted.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hooks/abc", posted
    server.shutdown()
    server.server_close()


def test_the_example_webhook_handler_posts_to_chat(
    probe, booking, settings, chat_server, tasks_run_inline
):
    url, posted = chat_server
    handlers(
        settings, {"handler": "protection.handlers.examples.post_to_chat", "options": {"url": url}}
    )
    intrude(probe, (0, 10, "other", "python steal.py"))
    assert len(posted) == 1 and "other (process 10, python steal.py)" in posted[0]["text"]
    assert HandlerRun.objects.get().outcome == "posted to chat (200)"
