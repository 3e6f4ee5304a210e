"""Telling people: notify() records one delivery per channel; the notifications sender (a
process of its own, notifications.sender) sends what is due, and again with backoff after a
failure, until sent or given up. Whoever reports an event (a worker ending a job, starting a
queued one, checking protection) never waits for a webhook or a mail server.

The one way the service tells a person anything (reminders, withdrawn bookings, preempted
jobs, intruders, idle GPUs, ended jobs): the person's channels and the events they chose
apply to each. Password-reset mail is not a notice and does not come here (apitokens).

Never twice: a delivery is claimed by a conditional UPDATE (pending and due -> sending)
that only one sender wins, and the unique (channel, key) refuses a second delivery of the
same event however often it is reported.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Min, Q
from django.utils import timezone

from .models import EVENTS, Channel, Delivery
from .targets import Undelivered

log = logging.getLogger(__name__)
State = Delivery.State
STUCK_SECONDS = 600


MAIL, CHAT = "mail", "chat"  # notify(via=...): the mail channels only, or the others only


def channels_for(user, event: str, via: str | None = None) -> list[Channel]:
    """The user's enabled channels that want this event (``via``: of that sort only); a user
    who never set any up gets their mail address as the first channel (so mail stays the
    default)."""
    if via not in (None, MAIL, CHAT):
        raise ValueError(f"unknown sort of channel {via!r}")
    if via != CHAT and not user.channels.exists() and user.email:
        Channel.objects.get_or_create(user=user, kind=Channel.Kind.EMAIL, target="")
    channels = user.channels.filter(enabled=True)
    if via == MAIL:
        channels = channels.filter(kind=Channel.Kind.EMAIL)
    elif via == CHAT:
        channels = channels.exclude(kind=Channel.Kind.EMAIL)
    return [c for c in channels if event in c.events]


def notify(user, event: str, key: str, subject: str, text: str, link: str = "", *,
           via: str | None = None) -> int:  # fmt: skip
    """Tell ``user`` about one event on each channel that wants it; returns how many
    deliveries were recorded (the sender sends them). The same ``key`` told again, by any
    caller, records nothing more on a channel that has it.

    ``via``: MAIL or CHAT to tell on those channels only, where two callers share an event
    between them (protection's EmailHandler mails, its NotifyHandler tells the rest)."""
    if event not in EVENTS:
        raise ValueError(f"unknown event {event!r}")
    recorded = 0
    for channel in channels_for(user, event, via):
        try:
            with transaction.atomic():
                Delivery.objects.create(
                    channel=channel, event=event, key=key[:200], subject=subject[:255],
                    text=text, link=link, next_try_at=timezone.now(),
                )  # fmt: skip
        except IntegrityError:
            continue  # this event was told on this channel already
        recorded += 1
    return recorded


def due():
    # A sender that died mid-send leaves "sending": taken up again after a while. The while
    # is long: a send has no overall deadline (each read has one), and one taken up again
    # while still being sent would be told twice.
    stuck = timezone.now() - timedelta(seconds=STUCK_SECONDS)
    waiting = Q(state=State.PENDING, next_try_at__lte=timezone.now())
    return Delivery.objects.filter(waiting | Q(state=State.SENDING, next_try_at__lte=stuck))


def send_due() -> int:
    """Send what is due, one after the other, here; returns how many went out. (The sender
    sends concurrently, fairly between users: notifications.sender.)"""
    return sum(deliver(pk) for pk in due().values_list("pk", flat=True)[:200])


def backlog() -> dict:
    """What waits to be sent, for /healthz and the admin: deliveries due now (and how long
    the oldest has been due), being sent, and waiting for a retry."""
    now = timezone.now()
    pending = Delivery.objects.filter(state=State.PENDING)
    oldest = pending.filter(next_try_at__lte=now).aggregate(t=Min("next_try_at"))["t"]
    return {
        "due": pending.filter(next_try_at__lte=now).count(),
        "oldest_due_seconds": round((now - oldest).total_seconds(), 1) if oldest else None,
        "sending": Delivery.objects.filter(state=State.SENDING).count(),
        "retrying": pending.filter(next_try_at__gt=now).count(),
    }


def try_again(deliveries) -> int:
    """Make the unsent of ``deliveries`` (waiting or given up) due now, with their attempts
    counted afresh: for an admin who has fixed what made them fail. The retry schedule
    sends them. Returns how many."""
    unsent = deliveries.filter(state__in=[State.PENDING, State.FAILED])
    return unsent.update(state=State.PENDING, attempts=0, next_try_at=timezone.now())


def deliver(delivery_id: int) -> bool:
    """Send one delivery if this caller wins its claim; True when sent."""
    now = timezone.now()
    claimed = due().filter(pk=delivery_id).update(state=State.SENDING, next_try_at=now)
    if not claimed:
        return False
    delivery = Delivery.objects.select_related("channel__user").get(pk=delivery_id)
    try:
        SENDERS[delivery.channel.kind](delivery)
    except Exception as exc:  # recorded on the delivery and the channel, retried later
        failed(delivery, exc)
        return False
    Delivery.objects.filter(pk=delivery.pk).update(state=State.SENT, sent_at=timezone.now())
    Channel.objects.filter(pk=delivery.channel_id).update(last_success_at=timezone.now())
    return True


def failed(delivery: Delivery, exc: Exception) -> None:
    """Record a failed try where the channel's owner (and the admin) see it, in words fit
    for the owner (webhooks.failure); the log has the details. The channel's other waiting
    deliveries wait as long as this one: a dead webhook is tried once per backoff, not once
    per event."""
    attempts = delivery.attempts + 1
    given_up = attempts >= settings.NOTIFY_MAX_ATTEMPTS
    backoff = min(settings.NOTIFY_RETRY_SECONDS * 2 ** (attempts - 1), 3600)
    retry_at = timezone.now() + timedelta(seconds=backoff)
    message = failure(exc)[:1000]
    Delivery.objects.filter(pk=delivery.pk).update(
        state=State.FAILED if given_up else State.PENDING,
        attempts=attempts,
        last_error=message,
        next_try_at=retry_at,
    )
    waiting = Delivery.objects.filter(channel_id=delivery.channel_id, state=State.PENDING)
    waiting.filter(next_try_at__lt=retry_at).exclude(pk=delivery.pk).update(next_try_at=retry_at)
    Channel.objects.filter(pk=delivery.channel_id).update(
        last_error=message, last_error_at=timezone.now()
    )
    cause = exc.__cause__ or exc  # the webhook's own failure, for the admin
    log.warning(
        "notification %s on %s failed: %s (%s: %s)", delivery.key, delivery.channel, message,
        type(cause).__name__, cause,
    )  # fmt: skip


def failure(exc: Exception) -> str:
    """What the channel's owner reads: a webhook's own words (webhooks.Undelivered), or the
    mail failure's."""
    if isinstance(exc, Undelivered):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


# --- the channels -------------------------------------------------------------------------


def body(delivery: Delivery) -> str:
    return delivery.text + (f"\n{delivery.link}" if delivery.link else "")


def send_email(delivery: Delivery) -> None:
    address = delivery.channel.target or delivery.channel.user.email
    if not address:
        raise ValueError("no mail address: set one on the account or the channel")
    send_mail(delivery.subject, body(delivery), None, [address])


def payload(delivery: Delivery) -> dict:
    kind, text = delivery.channel.kind, f"{delivery.subject}\n{body(delivery)}"
    if kind in (Channel.Kind.SLACK, Channel.Kind.MATTERMOST):
        return {"text": text}
    if kind == Channel.Kind.MATRIX:  # matrix-hookshot's generic webhooks
        return {"text": text, "username": "GPU Hive"}
    return {
        "event": delivery.event,
        "key": delivery.key,
        "user": delivery.channel.user.get_username(),
        "subject": delivery.subject,
        "text": delivery.text,
        "link": delivery.link,
        "created": delivery.created.isoformat(),
    }


def post_json(delivery: Delivery) -> None:
    from .webhooks import post  # here: httpx is for the sender, not every worker importing this

    post(delivery.channel.target, payload(delivery))


SENDERS = {
    Channel.Kind.EMAIL: send_email,
    Channel.Kind.SLACK: post_json,
    Channel.Kind.MATTERMOST: post_json,
    Channel.Kind.MATRIX: post_json,
    Channel.Kind.JSON: post_json,
}
