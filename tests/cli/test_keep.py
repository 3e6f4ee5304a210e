"""`hive keep`: the owner keeps an ongoing booking; others are refused with the reason."""

from datetime import timedelta

from django.utils import timezone

from fairuse.models import IdleNotice
from reservations.services import create_reservation


def test_the_owner_keeps_and_another_user_is_refused(hive, signed_in, bookable, owner, other_user):
    start = timezone.now()
    booking = create_reservation(
        owner, title="mine", devices=[bookable[2]], start=start, end=start + timedelta(hours=2)
    )
    signed_in(other_user)
    result = hive("keep", str(booking.pk))
    assert result.exit_code == 1 and "Only the owner or an admin may keep" in result.output
    assert not IdleNotice.objects.exists()
    signed_in(owner)
    result = hive("keep", str(booking.pk))
    assert result.exit_code == 0 and f"Kept #{booking.pk}: Kept by owner" in result.output
    assert IdleNotice.objects.get().state == IdleNotice.State.KEPT
    result = hive("keep", "999999")
    assert result.exit_code == 1 and "999999" in result.output
