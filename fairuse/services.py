"""Keeping a booking: its owner (or an admin) says the GPUs are needed, idle or not."""

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accesscontrol.coverage import local_text
from audit.log import record
from reservations.models import Reservation

from .models import IdleNotice
from .policy import policy_for

State = IdleNotice.State


def check_keep(reservation: Reservation, user) -> None:
    if not (user.is_superuser or reservation.owner_id == user.pk):
        raise PermissionDenied("Only the owner or an admin may keep this reservation.")
    if reservation.status == Reservation.Status.CANCELLED:
        raise ValidationError({"reservation": "This reservation is cancelled."})
    if reservation.end <= timezone.now():
        released = reservation.idle_notices.filter(state=State.RELEASED).first()
        if released is not None:
            raise ValidationError({"reservation": f"Too late: {released.outcome}"})
        raise ValidationError({"reservation": "This reservation is over."})


def keep(reservation: Reservation, user) -> IdleNotice:
    """Exempt the booking from idle release for the rest of its time (idempotent)."""
    check_keep(reservation, user)
    now = timezone.now()
    outcome = f"Kept by {user} at {local_text(now)}."
    with transaction.atomic():
        kept = reservation.idle_notices.filter(state=State.KEPT).first()
        if kept is not None:
            return kept
        notice = reservation.idle_notices.filter(state=State.WARNED).first()
        # Conditional, like the release's claim: whichever comes first wins, never both.
        if notice and IdleNotice.objects.filter(pk=notice.pk, state=State.WARNED).update(
            state=State.KEPT, kept_by=user, closed_at=now, outcome=outcome
        ):
            notice.refresh_from_db()
        else:
            notice = _new_kept(reservation, user, now, outcome)
        record("reservation.idle_kept", actor=user, target=reservation, reservation=reservation.pk)
    return notice


def _new_kept(reservation, user, now, outcome) -> IdleNotice:
    try:
        with transaction.atomic():
            return IdleNotice.objects.create(
                reservation=reservation,
                state=State.KEPT,
                action=policy_for(reservation).action,
                kept_by=user,
                closed_at=now,
                outcome=outcome,
            )
    except IntegrityError:  # kept at the same moment by another request
        return reservation.idle_notices.get(state=State.KEPT)
