"""Mails to a booking's owner about its idle GPUs (sent by the workers after commit)."""

from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse

from accesscontrol.coverage import local_text
from monitoring import lease

from .models import IdleNotice

ACTIVITY = "fairuse-idle"


def keep_url(reservation_id: int) -> str:
    # Workers have no request: the public URL's path prefix is part of PUBLIC_URL.
    return settings.PUBLIC_URL.rstrip("/") + reverse("fairuse-keep", args=[reservation_id])


def labels(notice: IdleNotice) -> str:
    return ", ".join(f"{d.host.name}:{d.index}" for d in notice.devices.select_related("host"))


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


def _send(notice_id: int, subject: str, body) -> None:
    notice = IdleNotice.objects.select_related("reservation__owner").get(pk=notice_id)
    owner = notice.reservation.owner
    if not owner.email:
        return
    try:
        send_mail(subject.format(title=notice.reservation.title), body(notice), None, [owner.email])
    except Exception as exc:  # the notice stands; the failure shows on the activity
        lease.record_failure(ACTIVITY, f"mail about reservation {notice.reservation_id}: {exc!r}")


def send_warning(notice_id: int) -> None:
    _send(notice_id, "Your reservation '{title}' is idle", warning_text)


def send_released(notice_id: int) -> None:
    _send(notice_id, "Idle GPUs of '{title}' were given back", lambda n: n.outcome)
