"""core.rows.ValuesRows: a list written from values() by its serializer's fields is
what the serializer writes from instances, and a field it cannot read from columns is refused
when the writer is made."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework import serializers

from core.rows import ValuesRows
from reservations.models import Reservation
from reservations.services import create_reservation

from .conftest import tomorrow


class Dated(serializers.ModelSerializer):
    """Fields written by their own to_representation (a date format, an e-mail field), a
    slug through a foreign key, and times with microseconds (``created``, ``updated``: on
    SQLite read as the text it keeps)."""

    start = serializers.DateTimeField(format="%d.%m.%Y %H:%M")
    end = serializers.DateTimeField(default_timezone=timezone.get_fixed_timezone(-90))
    owner = serializers.SlugRelatedField(slug_field="email", read_only=True)
    title = serializers.EmailField()

    class Meta:
        model = Reservation
        fields = ["id", "start", "end", "owner", "title", "used_utilization", "created", "updated"]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_fields_written_their_own_way_match_the_serializer(owner, lab, everyone_may_book, zone):
    owner.email = "owner@example.org"
    owner.save()
    start = tomorrow(9)
    for hours in (1, 2):
        end = start + timedelta(hours=hours)
        create_reservation(
            owner, title=f"a{hours}@b.org", devices=lab[hours - 1 : hours], start=start, end=end
        )
    Reservation.objects.filter(title="a1@b.org").update(used_utilization=12.5)
    timezone.activate(zone)
    try:
        queryset = Reservation.objects.all()
        assert ValuesRows(Dated)(queryset) == Dated(queryset, many=True).data
    finally:
        timezone.deactivate()


def test_a_field_not_read_from_columns_is_refused_at_once():
    class Computed(serializers.ModelSerializer):
        length = serializers.SerializerMethodField()

        class Meta:
            model = Reservation
            fields = ["id", "length"]

        def get_length(self, reservation) -> float:
            return (reservation.end - reservation.start).total_seconds()

    with pytest.raises(TypeError, match="length: SerializerMethodField"):
        ValuesRows(Computed)
