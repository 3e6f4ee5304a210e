"""Background tasks of reservations (run by the django-q2 cluster; arguments are ids)."""

from core import lease
from notifications.send import notify

from .services import refusal_after_now, reservations_to_recheck, withdraw_reservation

RECHECK_ACTIVITY = "reservation-recheck"


def recheck_reservations(user_ids: list[int], reason: str) -> str:
    """After grants changed: withdraw bookings no longer covered, and tell their owners.

    Nothing is ever re-activated here: a withdrawn booking stays so until its owner books
    again, so access that grows back never silently revives a reservation. The owner is
    told on their channels; the notifications sender sends it, and retries a mail server
    that is away, without holding up the withdrawals.
    """
    withdrawn = 0
    try:
        for reservation in reservations_to_recheck(user_ids):
            refusal = refusal_after_now(reservation)
            if refusal is None:
                continue
            note = f"Cancelled by the service because {reason}: {refusal}"
            withdraw_reservation(reservation, note)
            withdrawn += 1
            tell_withdrawn(reservation, note)
    except Exception as exc:  # recorded where admins look, then re-raised for django-q2
        lease.record_failure(RECHECK_ACTIVITY, exc)
        raise
    summary = f"{withdrawn} reservation(s) withdrawn"
    lease.record_success(RECHECK_ACTIVITY, summary)
    return summary


def tell_withdrawn(reservation, note: str) -> None:
    """Tell the owner on their channels that the service cancelled their booking (once)."""
    subject = f"Your reservation '{reservation.title}' was cancelled"
    key = f"reservation-{reservation.pk}-withdrawn"
    notify(reservation.owner, "booking_withdrawn", key, subject, note)
