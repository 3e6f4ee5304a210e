"""A MIG slice is bookable like a GPU; its GPU stands for the whole board. The one overlap
rule (the database's, migration 0007) refuses a GPU's booking over one of its slices' and
the other way round, and lets two slices of one GPU be booked at once."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accesscontrol.models import Grant
from monitoring.models import Device, Host, sharing
from reservations.models import Reservation, ReservedDevice
from reservations.services import cancel_reservation, create_reservation


def tomorrow(hours=9):
    base = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(days=1)
    return base.replace(hour=hours)


def book(user, devices, start=None, end=None):
    start, end = start or tomorrow(9), end or tomorrow(12)
    return create_reservation(user, title="run", devices=devices, start=start, end=end)


@pytest.fixture
def h100(db):
    """An H100 split as 3g.40gb + 2g.20gb + 1g.10gb + 1g.10gb, beside a whole GPU."""
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    gpu = Device.objects.create(host=host, index=0, uuid="GPU-a", mig_enabled=True)
    profiles = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    slices = [
        Device.objects.create(
            host=host, index=0, uuid=f"MIG-{n}", parent=gpu, mig_profile=p, mig_index=n
        )
        for n, p in enumerate(profiles)
    ]
    other = Device.objects.create(host=host, index=1, uuid="GPU-b")
    return gpu, slices, other


def test_sharing_pairs_a_gpu_with_its_slices_only(h100):
    gpu, slices, other = h100
    shared = sharing([gpu.pk, slices[2].pk, other.pk])
    assert [d.pk for d in shared[gpu.pk]] == [gpu.pk, *(s.pk for s in slices)]
    assert [d.pk for d in shared[slices[2].pk]] == [slices[2].pk, gpu.pk]
    assert [d.pk for d in shared[other.pk]] == [other.pk]


def test_two_slices_of_one_gpu_are_booked_apart(owner, other_user, h100, everyone_may_book):
    _, slices, _ = h100
    book(owner, [slices[2]])
    assert book(other_user, [slices[3]]).pk
    assert book(other_user, [slices[0], slices[1]]).pk


def test_a_slice_is_not_booked_twice(owner, other_user, h100, everyone_may_book):
    _, slices, _ = h100
    book(owner, [slices[2]])
    with pytest.raises(ValidationError) as info:
        book(other_user, [slices[2]], tomorrow(11), tomorrow(13))
    assert "node-1:0.2 (1g.10gb) is already reserved by owner" in str(info.value)


def test_the_gpu_is_not_booked_over_a_booked_slice(owner, other_user, h100, everyone_may_book):
    gpu, slices, _ = h100
    book(owner, [slices[1]])
    with pytest.raises(ValidationError) as info:
        book(other_user, [gpu], tomorrow(11), tomorrow(13))
    assert "node-1:0.1 (2g.20gb) is already reserved by owner" in str(info.value)
    assert Reservation.objects.count() == 1
    assert book(other_user, [gpu], tomorrow(12), tomorrow(14)).pk  # after it: fine


def test_no_slice_is_booked_while_its_gpu_is(owner, other_user, h100, everyone_may_book):
    gpu, slices, other = h100
    book(owner, [gpu])
    for piece in slices:
        with pytest.raises(ValidationError) as info:
            book(other_user, [piece], tomorrow(10), tomorrow(11))
        assert "GPU node-1:0 is already reserved by owner" in str(info.value)
    assert book(other_user, [other]).pk  # another GPU of the host is apart


def test_the_database_itself_keeps_gpus_and_slices_apart(owner, h100):
    """Rows written past the service (any code path) meet the same rule, and the database
    writes each row's board itself."""
    gpu, slices, other = h100
    start, end = tomorrow(9), tomorrow(12)
    first, second = (
        Reservation.objects.create(owner=owner, title=t, start=start, end=end) for t in "ab"
    )
    ReservedDevice.objects.create(reservation=first, device=slices[0], start=start, end=end)
    for clash in (gpu, slices[0]):
        with pytest.raises(IntegrityError, match="reserved_device_no_overlap"):
            with transaction.atomic():
                ReservedDevice.objects.create(
                    reservation=second, device=clash, start=start, end=end
                )
    ReservedDevice.objects.bulk_create(
        ReservedDevice(reservation=second, device=d, start=start, end=end)
        for d in (slices[1], other)
    )
    boards = dict(ReservedDevice.objects.values_list("device_id", "board_id"))
    assert boards == {slices[0].pk: gpu.pk, slices[1].pk: gpu.pk, other.pk: other.pk}
    # A cancelled booking holds nothing: the GPU is free once both are given back.
    ReservedDevice.objects.update(holds=False)
    ReservedDevice.objects.create(reservation=first, device=gpu, start=start, end=end)


def test_a_grant_of_a_gpu_covers_its_slices_and_not_the_reverse(owner, other_user, h100):
    gpu, slices, _ = h100
    whole = Grant.objects.create(name="the H100", scope=Grant.Scope.DEVICES)
    whole.devices.set([gpu])
    whole.users.set([owner])
    assert book(owner, [slices[3]]).pk
    piece = Grant.objects.create(name="one slice", scope=Grant.Scope.DEVICES)
    piece.devices.set([slices[2]])
    piece.users.set([other_user])
    assert book(other_user, [slices[2]], tomorrow(13), tomorrow(14)).pk
    with pytest.raises(ValidationError, match="not allowed on node-1:0 "):
        book(other_user, [gpu], tomorrow(15), tomorrow(16))


def test_cancelling_the_gpu_frees_its_slices(owner, other_user, h100, everyone_may_book):
    gpu, slices, _ = h100
    booking = book(owner, [gpu])
    cancel_reservation(booking, owner)
    assert book(other_user, [slices[0]]).pk
