"""Creating, editing and cancelling reservations: check the rules, then change, as one unit.

Every change is one transaction. The database has the last word on double booking (see
migration 0002); the Python check before it only exists to name the conflicting booking.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accesscontrol.coverage import check_access, local_text
from accesscontrol.permissions import managed_hosts
from audit.log import record
from core.api_errors import Conflict
from monitoring.models import Device, Host, sharing

from .models import Reservation, ReservedDevice

OVERLAP_GUARD = "reserved_device_no_overlap"


@dataclass(frozen=True)
class Rules:
    """The booking rules; each is a setting so a lab can change it."""

    min_duration: timedelta
    max_duration: timedelta
    start_grace: timedelta

    @classmethod
    def from_settings(cls) -> "Rules":
        return cls(
            timedelta(minutes=settings.RESERVATION_MIN_MINUTES),
            timedelta(days=settings.RESERVATION_MAX_DAYS),
            timedelta(seconds=settings.RESERVATION_START_GRACE_SECONDS),
        )


def check_period(start: datetime, end: datetime, now: datetime, rules: Rules) -> None:
    if end <= start:
        raise ValidationError({"end": "The reservation must end after it starts."})
    if end - start < rules.min_duration:
        minutes = int(rules.min_duration.total_seconds() // 60)
        raise ValidationError({"end": f"A reservation lasts at least {minutes} minutes."})
    if end - start > rules.max_duration:
        raise ValidationError(
            {"end": f"A reservation lasts at most {rules.max_duration.days} days."}
        )
    if start < now - rules.start_grace:
        raise ValidationError({"start": "A reservation cannot start in the past."})


def check_devices(owner, devices: list[Device], start: datetime, end: datetime) -> None:
    """Each GPU must exist now and be usable by the owner over the whole period."""
    if not devices:
        raise ValidationError({"devices": "Choose at least one GPU."})
    lost = [str(d) for d in devices if d.status == Device.Status.LOST]
    if lost:
        raise ValidationError({"devices": f"GPU(s) no longer present: {', '.join(lost)}."})
    refusals = [check_access(owner, d, start, end) for d in devices]
    reasons = [r.reason for r in refusals if not r.allowed]
    if reasons:
        # Admins want to see who tried to book outside their grants (a clash with another
        # booking is ordinary contention and is not audited).
        record(
            "reservation.refused",
            actor=owner,
            target=", ".join(str(d) for d in devices),
            start=start.isoformat(),
            end=end.isoformat(),
            reasons=reasons,
        )
        raise ValidationError({"devices": reasons})


def conflict_message(devices: list[Device], start: datetime, end: datetime, exclude=None) -> str:
    # A booking of a GPU holds its MIG slices, and a slice's booking part of its GPU.
    shared = {d.pk for family in sharing(d.pk for d in devices).values() for d in family}
    clash = (
        ReservedDevice.objects.holding(start, end)
        .filter(device__in=shared)
        .exclude(reservation=exclude)
        .select_related("device__host", "reservation__owner")
        .first()
    )
    if clash is None:  # the other booking was cancelled in between: still refused, say so
        return "One of these GPUs was booked at the same moment by someone else; try again."
    return (
        f"GPU {clash.device} is already reserved by {clash.reservation.owner} from "
        f"{local_text(clash.start)} to {local_text(clash.end)}."
    )


def _save_slots(reservation: Reservation, devices: list[Device]) -> None:
    """Write the exclusive rows; the database refuses overlaps (IntegrityError)."""
    try:
        with transaction.atomic():
            reservation.slots.all().delete()
            ReservedDevice.objects.bulk_create(
                ReservedDevice(
                    reservation=reservation, device=d, start=reservation.start, end=reservation.end
                )
                for d in devices
            )
    except IntegrityError as exc:
        if OVERLAP_GUARD not in str(exc):
            raise
        message = conflict_message(devices, reservation.start, reservation.end, reservation)
        raise ValidationError({"devices": message}) from None


def create_reservation(owner, *, title, devices, start, end, description="") -> Reservation:
    devices = list(devices)
    check_period(start, end, timezone.now(), Rules.from_settings())
    # Checked before the transaction, so the audit record of a refusal is not rolled back
    # with it; the database constraint, not this check, settles races between bookings.
    check_devices(owner, devices, start, end)
    with transaction.atomic():
        reservation = Reservation.objects.create(
            owner=owner,
            title=title,
            description=description,
            start=start,
            end=end,
            status=initial_status(devices),
        )
        _save_slots(reservation, devices)
    return reservation


# --- approval ---------------------------------------------------------------------------------
# A pending booking holds its GPUs like a confirmed one (its slots hold), so approving it can
# never create a conflict, and nobody else can take the slot while an admin decides.


def hosts_needing_approval(devices) -> list[Host]:
    return list(Host.objects.filter(devices__in=devices, bookings_need_approval=True).distinct())


def initial_status(devices) -> str:
    if hosts_needing_approval(devices):
        return Reservation.Status.PENDING
    return Reservation.Status.CONFIRMED


def may_decide(user, reservation: Reservation) -> bool:
    """Superusers, or admins of every host of the booking that asks for approval."""
    if user.is_superuser:
        return True
    needed = {h.pk for h in hosts_needing_approval(reservation.devices.all())}
    managed = set(managed_hosts(user).filter(pk__in=needed).values_list("pk", flat=True))
    return bool(needed) and needed <= managed


def _check_decision(reservation: Reservation, user) -> None:
    if reservation.status != Reservation.Status.PENDING:
        raise ValidationError(f"'{reservation.title}' is not awaiting approval.")
    if not may_decide(user, reservation):
        raise PermissionDenied("Only an admin of the booked hosts may decide on this booking.")


@transaction.atomic
def approve_reservation(reservation: Reservation, user) -> Reservation:
    lock_unchanged(reservation)
    _check_decision(reservation, user)
    reservation.status = Reservation.Status.CONFIRMED
    reservation.save(update_fields=["status", "updated"])
    record("reservation.approved", actor=user, target=reservation)
    return reservation


@transaction.atomic
def reject_reservation(reservation: Reservation, user, reason: str = "") -> Reservation:
    lock_unchanged(reservation)
    _check_decision(reservation, user)
    note = f"Not approved by {user}" + (f": {reason}" if reason else ".")
    withdraw_reservation(reservation, note)
    record("reservation.rejected", actor=user, target=reservation, reason=reason)
    return reservation


def check_can_change(reservation: Reservation, user) -> None:
    if not (user.is_superuser or reservation.owner_id == user.pk):
        raise PermissionDenied("Only the owner or an admin may change this reservation.")
    if reservation.status == Reservation.Status.CANCELLED:
        raise ValidationError("This reservation is cancelled.")
    if reservation.end <= timezone.now():
        raise ValidationError("This reservation is over and can no longer be changed.")


def update_reservation(reservation: Reservation, user, **changes) -> Reservation:
    """Edit a reservation. Once started, only its end may move, and not before now."""
    check_can_change(reservation, user)
    now = timezone.now()
    current = list(reservation.devices.all())
    devices = list(changes.pop("devices", current))
    start = changes.get("start", reservation.start)
    end = changes.get("end", reservation.end)
    # Which rules apply depends on the booking as it stands, not as edited: a future
    # booking moved into the past must meet the full rules (and fails them). Checked before
    # the transaction, as in create_reservation, so a refusal's audit record is kept.
    if reservation.start <= now:
        _check_started_edit(reservation, changes, set(devices) != set(current), now)
        check_devices(reservation.owner, devices, now, end)
    else:
        check_period(start, end, now, Rules.from_settings())
        check_devices(reservation.owner, devices, start, end)
    if set(devices) != set(current):
        wanted = initial_status(devices)
        if Reservation.Status.PENDING in (reservation.status, wanted):
            # New GPUs: an admin decides again where their hosts ask for approval, and a
            # pending booking moved off such hosts needs nobody's approval any more.
            reservation.status = wanted
    changed = ["status"] + [f for f in ("title", "description", "start", "end") if f in changes]
    for field in changed[1:]:
        setattr(reservation, field, changes[field])
    with transaction.atomic():
        lock_unchanged(reservation)
        reservation.save(update_fields=[*changed, "updated"])
        _save_slots(reservation, devices)
    return reservation


def lock_unchanged(reservation: Reservation) -> None:
    """Lock the reservation's row until the transaction ends, and refuse (Conflict, a 409) if
    it changed since ``reservation`` was read: a cancel or edit in between would otherwise be
    overwritten by this older copy (a cancelled booking came back)."""
    rows = Reservation.objects.select_for_update().only("title", "status", "updated")
    stored = rows.get(pk=reservation.pk)
    if stored.updated == reservation.updated:
        return
    if stored.status == Reservation.Status.CANCELLED:
        raise Conflict(f"'{stored.title}' was cancelled meanwhile; nothing was changed.")
    raise Conflict(
        f"'{stored.title}' was changed meanwhile by someone else; nothing was changed. "
        "Reload it and try again."
    )


def _check_started_edit(reservation, changes, new_gpus: bool, now) -> None:
    if "start" in changes and changes["start"] != reservation.start:
        raise ValidationError({"start": "The reservation has started: its start cannot move."})
    if new_gpus:
        raise ValidationError({"devices": "The reservation has started: its GPUs cannot change."})
    end = changes.get("end", reservation.end)
    if end < now:
        raise ValidationError({"end": "The end cannot be moved into the past."})
    if end - reservation.start > Rules.from_settings().max_duration:
        raise ValidationError({"end": "A reservation lasts at most the maximum duration."})


@transaction.atomic
def cancel_reservation(reservation: Reservation, user, note: str = "") -> Reservation:
    """Cancel a future reservation; end an ongoing one now (its history is kept)."""
    lock_unchanged(reservation)
    check_can_change(reservation, user)
    withdraw_reservation(reservation, note or reservation.note)
    return reservation


def reservations_to_recheck(user_ids) -> list[Reservation]:
    """Reservations of these users that still hold GPUs now or later."""
    return list(
        Reservation.objects.filter(owner_id__in=user_ids, end__gt=timezone.now())
        .exclude(status=Reservation.Status.CANCELLED)
        .select_related("owner")
        .prefetch_related("devices__host")
    )


def refusal_after_now(reservation: Reservation) -> str | None:
    """Why the owner may no longer use one of its GPUs for the rest of it, or None."""
    start = max(reservation.start, timezone.now())
    for device in reservation.devices.all():
        decision = check_access(reservation.owner, device, start, reservation.end)
        if not decision.allowed:
            return decision.reason
    return None


@transaction.atomic
def withdraw_reservation(reservation: Reservation, note: str) -> None:
    """Cancel (or end now, if ongoing) on the service's own authority, with the reason."""
    now = timezone.now()
    if reservation.start < now:
        reservation.end = now
        reservation.slots.update(end=now)
    else:
        reservation.status = Reservation.Status.CANCELLED
        reservation.slots.update(holds=False)
    reservation.note = note
    reservation.save(update_fields=["status", "end", "note", "updated"])


@transaction.atomic
def release_devices(reservation: Reservation, devices, note: str) -> None:
    """Give some GPUs of an ongoing reservation back now; giving back all of them ends it.

    The released GPUs' rows go (the booking keeps the others, times unchanged), so they are
    free for others and the queue at once; the note says which went and why.
    """
    released = {d.pk for d in devices}
    if not set(reservation.slots.values_list("device_id", flat=True)) - released:
        withdraw_reservation(reservation, note)
        return
    reservation.slots.filter(device_id__in=released).delete()
    reservation.note = note
    reservation.save(update_fields=["note", "updated"])  # its post_save makes the queue look again
