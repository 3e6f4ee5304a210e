"""What handlers tell people, in words from the domain."""

from django.conf import settings
from django.utils import timezone

from accesscontrol.coverage import local_text

from ..models import Violation


def sanitized(text: str) -> str:
    """Printable text only: the command line is the intruder's own text, and a terminal
    would obey escape sequences hidden in it."""
    return "".join(ch for ch in text if ch == "\n" or (ch.isprintable() and ch != "\x7f"))


def gpu_text(violation: Violation) -> str:
    device = violation.device
    return f"GPU {device.label} of {device.host.name}"


def to_offender(violation: Violation) -> str:
    """ "You are on someone's GPU": for the offender's terminal and mail."""
    reservation = violation.reservation
    if reservation is not None:
        whose = (
            f"is reserved by {reservation.owner.get_username()} until {local_text(reservation.end)}"
        )
    else:
        whose = "is not reserved by you (this lab requires a reservation for every GPU)"
    container = violation.container_name or violation.container_id
    where = f" in container {container}" if container else ""
    text = (
        f"GPU Hive: your process {violation.pid}{where} ({violation.command[:200]}) has been using "
        f"{gpu_text(violation)} since {local_text(violation.first_seen)}, but that GPU {whose}.\n"
        f"Please stop it. Details: {settings.PUBLIC_URL.rstrip('/')}/protection/\n"
    )
    return sanitized(text)


def to_owner(violation: Violation) -> str:
    """ "Someone is on your GPU": for the reservation's owner and admins."""
    text = (
        f"GPU Hive: {violation.offender_name} (process {violation.pid}, "
        f"{violation.command[:200]}) has been using {gpu_text(violation)} since "
        f"{local_text(violation.first_seen)}"
    )
    if violation.reservation is not None:
        text += f", which is reserved for '{violation.reservation.title}'"
    text += f" (as of {local_text(timezone.now())}).\n"
    return sanitized(text + f"Details: {settings.PUBLIC_URL.rstrip('/')}/protection/\n")
