"""The sender shares its threads fairly between users; /healthz and the admin show what
waits to be sent, and /healthz fails only when nothing sends it."""

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from core.lease import record_success
from notifications import send
from notifications.models import Channel, Delivery
from notifications.sender import ACTIVITY, Sender
from tests.jobs.conftest import wait_for

State = Delivery.State


def tell(user, key):
    send.notify(user, "job_ended", key, "Your job ended", "exit code 0")


@pytest.mark.django_db(transaction=True)
def test_one_users_hanging_hooks_leave_threads_for_the_others(
    owner, other_user, silent, receiver, settings
):
    settings.NOTIFY_SEND_TIMEOUT = 60
    for _ in range(3):
        Channel.objects.create(user=owner, kind="json", target=silent.url)
    tell(owner, "job-1-ended")
    Channel.objects.create(user=other_user, kind="json", target=receiver.url)
    tell(other_user, "job-2-ended")
    sender, stop = Sender(threads=2, per_user=1), threading.Event()
    thread = threading.Thread(target=sender.run, args=(stop,))
    thread.start()
    try:
        assert wait_for(lambda: len(receiver.received) == 1, 15)
        assert silent.open == 1  # the owner's share: one thread of two
        assert Delivery.objects.filter(channel__user=owner, state=State.PENDING).count() == 2
    finally:
        stop.set()
        thread.join(timeout=10)
        silent.close()
        sender.pool.shutdown(wait=True)


@pytest.fixture
def overdue(owner):
    channel = Channel.objects.create(user=owner, kind="slack", target="https://hooks.example.org")
    for n, minutes in enumerate((20, 1)):
        Delivery.objects.create(
            channel=channel, event="job_ended", key=f"k-{n}", subject="s", text="t",
            next_try_at=timezone.now() - timedelta(minutes=minutes),
        )  # fmt: skip
    later = timezone.now() + timedelta(minutes=5)
    Delivery.objects.create(channel=channel, event="job_ended", key="later", subject="s",
                            text="t", next_try_at=later)  # fmt: skip


def deliveries_check(client):
    response = client.get("/healthz")
    return response.status_code, response.json()["checks"]["deliveries"]


def test_healthz_shows_the_backlog_and_fails_when_no_sender_works(client, overdue, settings):
    settings.NOTIFY_BACKLOG_SECONDS = 300
    _, check = deliveries_check(client)
    assert check["ok"] is False  # due for 20 minutes, and no sender ever reported
    assert check["due"] == 2 and check["retrying"] == 1 and check["sending"] == 0
    assert 1190 <= check["oldest_due_seconds"] <= 1300
    record_success(ACTIVITY, "sender 1: 0 sent")
    _, check = deliveries_check(client)
    assert check["ok"] is True  # a sender works: one user's backlog is not the service down


def test_healthz_deliveries_are_ok_with_nothing_due(client, db):
    _, check = deliveries_check(client)
    assert check == {"ok": True, "due": 0, "oldest_due_seconds": None, "sending": 0,
                     "retrying": 0}  # fmt: skip


def test_the_admin_shows_the_backlog(client, admin_user, overdue):
    client.force_login(admin_user)
    page = client.get("/admin/notifications/delivery/").content.decode()
    assert "Backlog: 2 due now (the oldest for 12" in page  # about 1200 s
    assert "0 being sent, 1 waiting to be tried again" in page
