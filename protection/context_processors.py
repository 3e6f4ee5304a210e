"""The in-app notice: every page tells a booking's owner who is on their reserved GPUs now.

It reads the open violations themselves, so it needs no channel and no handler, and it goes
away when the intruder does.
"""

from .models import Violation

SHOWN = 3  # more are counted, and listed on the protection page


def intrusions(request) -> dict:
    """Adds ``intrusions`` (the first few open ones on the user's bookings) and
    ``intrusions_more`` (how many others); render them with protection/banner.html."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    open_ones = (
        Violation.objects.filter(ended_at=None, reservation_owner=user)
        .exclude(offender=user)
        .select_related("device__host", "reservation")
        .order_by("first_seen")
    )
    shown = list(open_ones[: SHOWN + 1])
    more = open_ones.count() - SHOWN if len(shown) > SHOWN else 0
    return {"intrusions": shown[:SHOWN], "intrusions_more": more}
