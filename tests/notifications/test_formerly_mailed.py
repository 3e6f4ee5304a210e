"""The notices that were once mailed directly (a booking's reminder, a booking the service
withdrew, a queued job stopped, protection's EmailHandler) go through the notifications app:
each is a delivery on the person's channels that want it, recorded once however often it
is told, and a mail server that is away is retried by the sender and shown to admins."""

import threading
from contextlib import suppress
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from monitoring.models import Device, Host
from notifications.models import EVENTS, Channel, Delivery
from notifications.send import send_due
from notifications.sender import Sender
from protection.handlers import Skip
from protection.handlers.email import EmailHandler
from protection.models import Violation
from queueing.models import QueuedJob, QueueRun
from queueing.scheduler import tell_owner
from reservations import notifications as reminders
from reservations.models import Reservation
from reservations.tasks import tell_withdrawn
from tests.jobs.conftest import wait_for


def booking(user, minutes):
    start = timezone.now() + timedelta(minutes=minutes)
    return Reservation.objects.create(
        owner=user, title="thesis", start=start, end=start + timedelta(hours=1)
    )


# Each former mail: given its recipient, the call that tells it (as its caller makes it).


def reminder(user):
    booking(user, minutes=10)  # within RESERVATION_REMIND_START_MINUTES (30)
    return reminders.send_due


def withdrawn(user):
    reservation = booking(user, minutes=600)
    return lambda: tell_withdrawn(reservation, "Cancelled by the service because a grant ended")


def preempted(user):
    queued = QueuedJob.objects.create(owner=user, name="sweep")
    job = Job.objects.create(owner=user, name="sweep")
    run = QueueRun.objects.create(queued_job=queued, job=job, gpus=1)
    return lambda: tell_owner(run, "GPU 0 on node-1 is reserved by boss from 09:00", True)


def intruding(user):
    device = Device.objects.create(
        host=Host.objects.create(name="node-1", address="10.0.0.1"), index=0, uuid="GPU-0"
    )
    now = timezone.now()
    violation = Violation.objects.create(
        device=device, offender_unix=user.username, offender=user, pid=4242,
        command="python steal.py", first_seen=now, last_seen=now,
    )  # fmt: skip
    handler = EmailHandler(name="protection.handlers.email.EmailHandler")

    def tell():
        with suppress(Skip):  # told already: the handler says so
            handler.handle(violation)

    return tell


FORMER_MAILS = {
    "booking_starts": reminder,
    "booking_withdrawn": withdrawn,
    "queued_stopped": preempted,
    "on_others_gpu": intruding,
}
# EmailHandler keeps to mail channels: the offender's chat is NotifyHandler's (shipped too).
MAIL_ONLY = {"on_others_gpu"}


@pytest.mark.parametrize("event", FORMER_MAILS)
def test_each_goes_to_the_channels_that_want_it(event, owner, receiver, smtp):
    Channel.objects.create(user=owner, kind="email", events=[e for e in EVENTS if e != event])
    hook = Channel.objects.create(user=owner, kind="json", target=receiver.url, events=[event])
    FORMER_MAILS[event](owner)()
    told = [] if event in MAIL_ONLY else [(hook, event)]
    assert [(d.channel, d.event) for d in Delivery.objects.all()] == told
    assert send_due() == len(told) and smtp.messages == []
    assert [body["event"] for _, body in receiver.received] == [event for _ in told]


@pytest.mark.parametrize("event", FORMER_MAILS)
def test_each_told_twice_is_one_mail_at_the_default_address(event, owner, smtp):
    tell = FORMER_MAILS[event](owner)
    tell()
    tell()  # a schedule's next run, a retried worker task, a second handler
    assert Delivery.objects.get().event == event
    assert send_due() == 1 and send_due() == 0
    assert smtp.to() == [["owner@example.org"]]


@pytest.mark.django_db(transaction=True)
def test_a_mail_server_away_is_retried_by_the_sender_and_shown_to_admins(
    owner, admin_user, smtp, settings, client
):
    settings.NOTIFY_RETRY_SECONDS = 1
    smtp.down()
    withdrawn(owner)()
    sender, stop = Sender(threads=1, per_user=1), threading.Event()
    thread = threading.Thread(target=sender.run, args=(stop,))
    thread.start()
    try:
        assert wait_for(lambda: Delivery.objects.get().attempts >= 1, 15)
        client.force_login(admin_user)
        listed = client.get("/admin/notifications/delivery/").content.decode()
        assert "Connection refused" in listed  # the admin's list says why it is not sent
        assert Channel.objects.get(user=owner).failing  # and the owner's pages say so too
        smtp.up()
        assert wait_for(lambda: smtp.messages, 15)  # tried again after the backoff
    finally:
        stop.set()
        thread.join(timeout=10)
        sender.pool.shutdown(wait=True)
    delivery = Delivery.objects.get()
    assert delivery.state == Delivery.State.SENT and delivery.attempts >= 1
    assert smtp.to() == [["owner@example.org"]]
