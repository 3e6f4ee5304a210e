"""Background tasks of reservations (run by the django-q2 cluster; arguments are ids)."""

from django.core.mail import send_mail

from .services import refusal_after_now, reservations_to_recheck, withdraw_reservation


def recheck_reservations(user_ids: list[int], reason: str) -> str:
    """After grants changed: withdraw bookings no longer covered, and tell their owners.

    Nothing is ever re-activated here: a withdrawn booking stays so until its owner books
    again, so access that grows back never silently revives a reservation.
    """
    withdrawn = 0
    for reservation in reservations_to_recheck(user_ids):
        refusal = refusal_after_now(reservation)
        if refusal is None:
            continue
        note = f"Cancelled by the service because {reason}: {refusal}"
        withdraw_reservation(reservation, note)
        _tell_owner(reservation, note)
        withdrawn += 1
    return f"{withdrawn} reservation(s) withdrawn"


def _tell_owner(reservation, note: str) -> None:
    if reservation.owner.email:
        send_mail(
            f"Your reservation '{reservation.title}' was cancelled",
            note,
            None,
            [reservation.owner.email],
        )
