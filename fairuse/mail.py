"""Telling a booking's owner about its idle GPUs (by the workers, after commit), on the
owner's notification channels (mail unless they chose otherwise)."""

from django.conf import settings
from django.urls import reverse

from accesscontrol.coverage import local_text
from core import lease
from notifications.send import notify

from .models import IdleNotice

ACTIVITY = "fairuse-idle"


def keep_url(reservation_id: int) -> str:
    # Workers have no request: the public URL's path prefix is part of PUBLIC_URL.
    return settings.PUBLIC_URL.rstrip("/") + reverse("fairuse-keep", args=[reservation_id])


def labels(notice: IdleNotice) -> str:
    return ", ".join(f"{d.host.name}:{d.label}" for d in notice.devices.select_related("host"))


def warning_text(notice: IdleNotice) -> str:
    reservation = notice.reservation
    text = (
        f"GPU(s) {labels(notice)} of your reservation '{reservation.title}' show no "
        "process of yours and almost no load."
    )
    if notice.release_at:
        text += (
            f" Unless you keep the reservation, the idle GPUs go back to the lab at "
            f"{local_text(notice.release_at)}."
        )
    link = keep_url(reservation.pk)
    return text + f"\n\nKeep it (one click): {link}\nor run: hive keep {reservation.pk}"


def _send(notice_id: int, event: str, subject: str, body) -> None:
    notice = IdleNotice.objects.select_related("reservation__owner").get(pk=notice_id)
    reservation = notice.reservation
    try:
        notify(
            reservation.owner,
            event,
            f"idle-notice-{notice.pk}-{event}",
            subject.format(title=reservation.title),
            body(notice),  # the warning's text carries its keep link
        )
    except Exception as exc:  # the notice stands; the failure shows on the activity
        lease.record_failure(ACTIVITY, f"telling about reservation {reservation.pk}: {exc!r}")


def send_warning(notice_id: int) -> None:
    _send(notice_id, "idle_warning", "Your reservation '{title}' is idle", warning_text)


def send_released(notice_id: int) -> None:
    _send(
        notice_id, "booking_released", "Idle GPUs of '{title}' were given back", lambda n: n.outcome
    )
