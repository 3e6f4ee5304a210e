"""The reservations list is read with values(), written by its serializer's fields
(core.rows.ValuesRows) and rendered by orjson: the same answer as the serializer and
DRF's renderer give, in a number of queries that does not grow with it."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.renderers import JSONRenderer

from hiveproject.renderers import FastJSONRenderer
from monitoring.models import Device, Host
from reservations.api import ReservationSerializer, reservation_rows
from reservations.filters import filter_reservations
from reservations.models import Reservation
from tests.reservations.test_booking import book, tomorrow


@pytest.fixture
def lab(db):
    """Two hosts whose names sort against their creation order, so GPU order shows."""
    b = Host.objects.create(name="b-node", address="10.0.0.2")
    a = Host.objects.create(name="a-node", address="10.0.0.1")
    devices = [Device.objects.create(host=b, index=i, uuid=f"GPU-b{i}") for i in (1, 0)]
    devices += [Device.objects.create(host=a, index=i, uuid=f"GPU-a{i}") for i in (1, 0)]
    return devices


def make_bookings(owner, other_user, devices, count, first=0):
    for i in range(first, first + count):
        user = owner if i % 2 else other_user
        start = tomorrow(0) + timedelta(hours=2 * i)
        gpus = devices if i % 3 == 0 else devices[i % 4 : i % 4 + 1]
        book(user, gpus, start, start + timedelta(hours=1), title=f"run {i} ünïcode \u2028")
    Reservation.objects.filter(pk=Reservation.objects.first().pk).update(
        status=Reservation.Status.CANCELLED, note="cancelled: grant ended"
    )


def serializer_answer(queryset):
    return ReservationSerializer(queryset, many=True).data


@pytest.mark.parametrize(
    "params", [{}, {"user": "owner"}, {"start": "2000-01-01T00:00", "end": "2100-01-01T00:00Z"}]
)
@pytest.mark.parametrize("zone", ["UTC", "Europe/Warsaw"])
def test_the_lean_list_answers_what_the_serializer_answers(
    owner, other_user, lab, everyone_may_book, params, zone, settings
):
    make_bookings(owner, other_user, lab, 9)
    timezone.activate(zone)
    try:
        queryset = filter_reservations(
            Reservation.objects.select_related("owner").prefetch_related("devices"), params
        )
        assert reservation_rows(queryset) == serializer_answer(queryset)
        # a page, as the pagination of list endpoints slices it
        assert reservation_rows(queryset.all()[2:5]) == serializer_answer(queryset.all()[2:5])
    finally:
        timezone.deactivate()


def test_the_api_list_is_the_serializers_answer(client, owner, other_user, lab, everyone_may_book):
    make_bookings(owner, other_user, lab, 7)
    client.force_login(owner)
    answer = client.get("/api/reservations/", {"device": str(lab[0].pk)})
    expected = serializer_answer(Reservation.objects.filter(slots__device=lab[0]).distinct())
    assert answer.json() == json.loads(json.dumps(expected))
    assert answer.json()[0]["devices"] == [d.pk for d in sorted(lab, key=_gpu_order)]


def _gpu_order(device):
    return (device.host.name, device.index)


def test_the_list_costs_the_same_queries_for_3_or_30_bookings(
    client, owner, other_user, lab, everyone_may_book
):
    client.force_login(owner)

    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/api/reservations/").status_code == 200
        return len(captured)

    make_bookings(owner, other_user, lab, 3)
    few = queries()
    make_bookings(owner, other_user, lab, 27, first=3)
    assert Reservation.objects.count() == 30
    assert queries() == few


@pytest.mark.parametrize("params", [{}, {"user": "owner"}])
def test_a_later_page_read_by_ids_is_the_serializers_answer_in_as_many_queries(
    client, owner, other_user, lab, everyone_may_book, settings, params
):
    """Pages past the first are read by the ids an offset subquery picks
    (core.pagination.FirstPageUncounted): the same bookings, GPUs and order as the
    serializer gives for that slice of the list, and no query more than the first page."""
    settings.API_PAGE_SIZE = 4
    make_bookings(owner, other_user, lab, 11)
    client.force_login(owner)
    ordered = filter_reservations(Reservation.objects.order_by("start", "end", "id"), params)
    counts = []
    for page in (1, 2):
        with CaptureQueriesContext(connection) as captured:
            answer = client.get("/api/reservations/", {**params, "page": page})
        counts.append(len(captured))
        expected = serializer_answer(ordered[4 * (page - 1) : 4 * page])
        assert answer.json() == json.loads(json.dumps(expected))
    assert counts[0] == counts[1]


@pytest.mark.parametrize(
    "data",
    [
        [{"when": timezone.now(), "text": "zażółć \u2028 \u2029", "n": 2**40, "f": 0.1}],
        {1: "int keys", "nested": {"none": None, "list": [1.5, True]}},
        {"huge": 2**70},  # beyond orjson: DRF's renderer writes it
    ],
)
def test_orjson_writes_the_bytes_drf_writes(data):
    assert FastJSONRenderer().render(data) == JSONRenderer().render(data)


def test_the_browsable_api_still_gets_indented_json():
    context = {"indent": 4}
    assert FastJSONRenderer().render({"a": 1}, "application/json", context) == b'{\n    "a": 1\n}'


@pytest.mark.django_db
def test_a_query_that_cannot_match_makes_no_rows_and_no_query():
    """A filter on no ids makes no query at all (Django's EmptyResultSet), for the GPUs'
    subquery too."""
    with CaptureQueriesContext(connection) as captured:
        assert reservation_rows(Reservation.objects.filter(pk__in=[])) == []
    assert len(captured) == 0
