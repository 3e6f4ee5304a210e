"""Telling people: notify() records one delivery per channel, and each is sent at once by
the caller (a worker), then retried with backoff by a schedule until sent or given up.

Never twice: a delivery is claimed by a conditional UPDATE (pending and due -> sending)
that only one sender wins, and the unique (channel, key) refuses a second delivery of the
same event however often it is reported.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from .models import EVENTS, Channel, Delivery

log = logging.getLogger(__name__)
State = Delivery.State


def channels_for(user, event: str, chat_only: bool = False) -> list[Channel]:
    """The user's enabled channels that want this event; a user who never set any up gets
    their mail address as the first channel (so mail stays the default)."""
    if not chat_only and not user.channels.exists() and user.email:
        Channel.objects.get_or_create(user=user, kind=Channel.Kind.EMAIL, target="")
    channels = user.channels.filter(enabled=True)
    if chat_only:
        channels = channels.exclude(kind=Channel.Kind.EMAIL)
    return [c for c in channels if event in c.events]


def notify(user, event: str, key: str, subject: str, text: str, link: str = "", *,
           chat_only: bool = False) -> int:  # fmt: skip
    """Tell ``user`` about one event on each channel that wants it; returns how many sent.

    ``chat_only``: for events another path already mails (protection's EmailHandler)."""
    if event not in EVENTS:
        raise ValueError(f"unknown event {event!r}")
    created = []
    for channel in channels_for(user, event, chat_only):
        try:
            with transaction.atomic():
                created.append(
                    Delivery.objects.create(
                        channel=channel, event=event, key=key[:200], subject=subject[:255],
                        text=text, link=link, next_try_at=timezone.now(),
                    )
                )  # fmt: skip
        except IntegrityError:
            continue  # this event was told on this channel already
    return sum(deliver(d.pk) for d in created)


def due():
    stuck = timezone.now() - timedelta(seconds=settings.NOTIFY_SEND_TIMEOUT * 2)
    waiting = Q(state=State.PENDING, next_try_at__lte=timezone.now())
    # A sender that died mid-send leaves "sending": taken up again after a while.
    return Delivery.objects.filter(waiting | Q(state=State.SENDING, next_try_at__lte=stuck))


def retry_due() -> int:
    """The schedule: send what is due again; returns how many went out."""
    return sum(deliver(pk) for pk in due().values_list("pk", flat=True)[:200])


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
    attempts = delivery.attempts + 1
    given_up = attempts >= settings.NOTIFY_MAX_ATTEMPTS
    backoff = min(settings.NOTIFY_RETRY_SECONDS * 2 ** (attempts - 1), 3600)
    message = f"{type(exc).__name__}: {exc}"[:1000]
    Delivery.objects.filter(pk=delivery.pk).update(
        state=State.FAILED if given_up else State.PENDING,
        attempts=attempts,
        last_error=message,
        next_try_at=timezone.now() + timedelta(seconds=backoff),
    )
    Channel.objects.filter(pk=delivery.channel_id).update(
        last_error=message, last_error_at=timezone.now()
    )
    log.warning("notification %s on %s failed: %s", delivery.key, delivery.channel, message)


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
    url = delivery.channel.target
    if not url.startswith(("http://", "https://")):  # checked on input too: never file: etc.
        raise ValueError("a webhook URL must start with http:// or https://")
    import httpx  # here, not at the top: every worker imports this module, few send webhooks

    response = httpx.post(
        url,
        json=payload(delivery),
        headers={"User-Agent": "gpuhive-notifications"},
        timeout=settings.NOTIFY_SEND_TIMEOUT,
    )
    response.raise_for_status()  # redirects are not followed: a 3xx is a failure too
    if response.status_code >= 300:
        raise OSError(f"HTTP {response.status_code} from the webhook")


SENDERS = {
    Channel.Kind.EMAIL: send_email,
    Channel.Kind.SLACK: post_json,
    Channel.Kind.MATTERMOST: post_json,
    Channel.Kind.MATRIX: post_json,
    Channel.Kind.JSON: post_json,
}
