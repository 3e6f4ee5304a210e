"""Each channel against a real receiver; preferences; never twice; retries with backoff."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from notifications import send, webhooks
from notifications.models import Channel, Delivery

State = Delivery.State


def tell(user, key="task-1-ended", event="job_ended"):
    """Record the event, then send what is due as the sender would; how many went out."""
    send.notify(user, event, key, "Your job 'train' ended", "exit code 0", "http://x/jobs/1/")
    return send.send_due()


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("slack", {"text": "Your job 'train' ended\nexit code 0\nhttp://x/jobs/1/"}),
        ("mattermost", {"text": "Your job 'train' ended\nexit code 0\nhttp://x/jobs/1/"}),
        ("matrix", {"text": "Your job 'train' ended\nexit code 0\nhttp://x/jobs/1/",
                    "username": "GPU Hive"}),
    ],
)  # fmt: skip
def test_chat_webhooks_get_their_payload(receiver, owner, kind, expected):
    Channel.objects.create(user=owner, kind=kind, target=f"{receiver.url}/hooks/abc")
    assert tell(owner) == 1
    assert receiver.received == [("/hooks/abc", expected)]


def test_the_generic_json_webhook_gets_the_event(receiver, owner):
    Channel.objects.create(user=owner, kind="json", target=receiver.url + "/in")
    tell(owner)
    ((path, body),) = receiver.received
    assert body["event"] == "job_ended" and body["key"] == "task-1-ended"
    assert body["user"] == "owner" and body["text"] == "exit code 0"
    assert body["link"] == "http://x/jobs/1/"


def test_mail_goes_over_smtp_and_is_the_default_channel(smtp, owner):
    assert tell(owner) == 1
    (envelope,) = smtp.messages
    assert envelope.rcpt_tos == ["owner@example.org"]
    assert b"Subject: Your job 'train' ended" in envelope.content
    assert Channel.objects.get(user=owner).kind == "email"  # made on first use, editable


def test_preferences_are_respected(receiver, owner, smtp):
    Channel.objects.create(user=owner, kind="slack", target=receiver.url, events=["intruder"])
    Channel.objects.create(user=owner, kind="json", target=receiver.url, enabled=False)
    assert tell(owner) == 0
    assert receiver.received == [] and smtp.messages == []  # no implicit mail either
    assert send.notify(owner, "intruder", "v-1", "Someone is on GPU 0", "bob") == 1
    assert send.send_due() == 1 and len(receiver.received) == 1


def test_one_event_reported_twice_is_told_once(receiver, owner):
    Channel.objects.create(user=owner, kind="slack", target=receiver.url)
    assert tell(owner) == 1
    assert tell(owner) == 0
    assert len(receiver.received) == 1 and Delivery.objects.count() == 1


def test_a_failing_webhook_is_retried_with_backoff_and_shows_its_error(receiver, owner):
    channel = Channel.objects.create(user=owner, kind="slack", target=receiver.url)
    receiver.fail_next = 2
    assert tell(owner) == 0
    delivery = Delivery.objects.get()
    assert delivery.state == State.PENDING and delivery.attempts == 1
    assert delivery.next_try_at > timezone.now() + timedelta(seconds=25)
    channel.refresh_from_db()
    # An internal target (loopback, allowed for the test): no status, nothing to scan with.
    assert channel.failing and channel.last_error == webhooks.UNDELIVERED
    assert send.send_due() == 0  # not due yet: nothing is sent early
    for _ in range(2):
        Delivery.objects.update(next_try_at=timezone.now())  # the backoff has passed
        sent = send.send_due()
    delivery.refresh_from_db()
    assert sent == 1 and delivery.state == State.SENT and delivery.attempts == 2
    assert len(receiver.received) == 1  # the failed tries reached nobody; the third did
    channel.refresh_from_db()
    assert not channel.failing


def test_it_gives_up_after_the_last_attempt(receiver, owner, settings):
    settings.NOTIFY_MAX_ATTEMPTS = 2
    Channel.objects.create(user=owner, kind="json", target=receiver.url)
    receiver.fail_next = 5
    tell(owner)
    Delivery.objects.update(next_try_at=timezone.now())
    send.send_due()
    assert Delivery.objects.get().state == State.FAILED
    Delivery.objects.update(next_try_at=timezone.now())
    assert send.send_due() == 0 and receiver.received == []


@pytest.mark.django_db(transaction=True)
def test_two_senders_at_once_send_once(receiver, owner):
    Channel.objects.create(user=owner, kind="slack", target=receiver.url)
    receiver.fail_next = 1
    tell(owner)
    Delivery.objects.update(next_try_at=timezone.now())
    results = []

    def send_due():
        try:
            results.append(send.send_due())
        finally:  # this thread's own connection: left open, it outlived the test database
            connection.close()

    threads = [threading.Thread(target=send_due) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [0, 0, 0, 1] and len(receiver.received) == 1


def test_an_admin_tries_failed_deliveries_again(client, admin_user, owner, receiver):
    channel = Channel.objects.create(user=owner, kind="json", target=receiver.url)
    given_up, sent = (
        Delivery.objects.create(
            channel=channel, event="job_ended", key=key, subject="s", text="t", state=state,
            attempts=5, next_try_at=timezone.now() + timedelta(hours=1),
        )
        for key, state in (("k-1", State.FAILED), ("k-2", State.SENT))
    )  # fmt: skip
    client.force_login(admin_user)
    selected = {"action": "try_again", "_selected_action": [given_up.pk, sent.pk]}
    response = client.post("/admin/notifications/delivery/", selected, follow=True)
    assert "1 delivery(ies) will be sent" in response.content.decode()
    given_up.refresh_from_db()
    assert (given_up.state, given_up.attempts) == (State.PENDING, 0)
    assert send.send_due() == 1 and len(receiver.received) == 1  # the retry round sends it
    sent.refresh_from_db()
    assert (sent.state, sent.attempts) == (State.SENT, 5)
