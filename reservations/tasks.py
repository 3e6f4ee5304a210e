"""Background tasks of reservations (run by the django-q2 cluster; arguments are ids)."""

import logging

from django.core.mail import send_mail

from core import lease

from .services import refusal_after_now, reservations_to_recheck, withdraw_reservation

RECHECK_ACTIVITY = "reservation-recheck"
log = logging.getLogger(__name__)


def recheck_reservations(user_ids: list[int], reason: str) -> str:
    """After grants changed: withdraw bookings no longer covered, and tell their owners.

    Nothing is ever re-activated here: a withdrawn booking stays so until its owner books
    again, so access that grows back never silently revives a reservation. A mail that
    cannot be sent is recorded and does not keep the other bookings from being withdrawn.
    """
    withdrawn, unsent = 0, []
    try:
        for reservation in reservations_to_recheck(user_ids):
            refusal = refusal_after_now(reservation)
            if refusal is None:
                continue
            note = f"Cancelled by the service because {reason}: {refusal}"
            withdraw_reservation(reservation, note)
            withdrawn += 1
            if not _tell_owner(reservation, note):
                unsent.append(reservation.owner.username)
    except Exception as exc:  # recorded where admins look, then re-raised for django-q2
        lease.record_failure(RECHECK_ACTIVITY, exc)
        raise
    summary = f"{withdrawn} reservation(s) withdrawn"
    if unsent:
        lease.record_failure(RECHECK_ACTIVITY, f"{summary}; could not mail {', '.join(unsent)}")
    else:
        lease.record_success(RECHECK_ACTIVITY, summary)
    return summary


def _tell_owner(reservation, note: str) -> bool:
    """Mail the owner; False if the mail could not be sent (the withdrawal stands)."""
    if not reservation.owner.email:
        return True
    try:
        send_mail(
            f"Your reservation '{reservation.title}' was cancelled",
            note,
            None,
            [reservation.owner.email],
        )
    except Exception:
        log.exception("mailing %s about reservation %s failed", reservation.owner, reservation.pk)
        return False
    return True
