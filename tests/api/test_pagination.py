"""Every API list answers in pages (issue 20): the body stays an array, the paging is in the
Link and X-Total-Count headers; the page size is a setting; the `hive` client reads on."""

import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hive_cli.api import Api

from accesscontrol.services import ensure_default_group
from apitokens.services import issue_token
from jobs.models import Job, Task
from monitoring.models import Device, Host
from reservations.models import Reservation, ReservedDevice
from reservations.services import create_reservation

from .conftest import tomorrow


def links(response) -> dict:
    found = re.findall(r'<([^>]+)>; rel="(\w+)"', response.get("Link", ""))
    return {rel: url for url, rel in found}


@pytest.fixture
def five_gpus(db):
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    return [Device.objects.create(host=host, index=i, uuid=f"GPU-{i}") for i in range(5)]


def test_a_list_is_answered_in_pages_with_link_headers(client, owner, five_gpus, settings):
    settings.API_PAGE_SIZE = 2
    client.force_login(owner)
    first = client.get("/api/devices/")
    assert [d["id"] for d in first.json()] == [g.pk for g in five_gpus[:2]]
    assert first["X-Total-Count"] == "5"
    assert set(links(first)) == {"next", "first", "last"}
    assert links(first)["last"].endswith("/api/devices/?page=3")
    seen = []
    url = "/api/devices/"
    while url:
        response = client.get(url)
        seen += [d["id"] for d in response.json()]
        url = links(response).get("next")
    assert seen == [g.pk for g in five_gpus]
    assert "prev" in links(client.get("/api/devices/?page=2"))


def test_the_page_size_can_be_asked_for_up_to_the_maximum(client, owner, five_gpus, settings):
    settings.API_PAGE_SIZE, settings.API_MAX_PAGE_SIZE = 2, 4
    client.force_login(owner)
    assert len(client.get("/api/devices/?page_size=3").json()) == 3
    assert len(client.get("/api/devices/?page_size=1000").json()) == 4
    capped = client.get("/api/devices/?page_size=5")
    assert len(capped.json()) == 4 and "next" in links(capped)
    settings.API_MAX_PAGE_SIZE = 5
    assert "Link" not in client.get("/api/devices/?page_size=5")  # all on one page
    assert len(client.get("/api/devices/?page_size=").json()) == 2  # empty: the default


@pytest.mark.parametrize("value", ["bad", "1.5", "0", "-3", "²"])
@pytest.mark.parametrize("name", ["page", "page_size"])
def test_a_page_or_size_that_is_no_whole_number_is_refused(client, owner, five_gpus, name, value):
    # Before: page_size=1.5 got the default size (200), while the schema said an integer.
    client.force_login(owner)
    response = client.get("/api/devices/", {name: value})
    assert response.status_code == 400
    assert response.json()["detail"].startswith(f"{name}: ") and "whole number" in str(
        response.json()
    )


@pytest.mark.parametrize(("page_size", "counted"), [(5, True), (6, False), (2, True)])
def test_a_list_on_one_first_page_is_counted_from_its_rows(
    client, owner, five_gpus, page_size, counted
):
    """A first page with fewer rows than its size is the whole list: no COUNT query, and
    the same headers. A full first page may have more after it: counted as before."""
    client.force_login(owner)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/api/devices/?page_size={page_size}")
    assert response["X-Total-Count"] == "5"
    assert len(response.json()) == min(page_size, 5)
    assert ("next" in links(response)) == (page_size < 5)
    assert any("COUNT(" in q["sql"].upper() for q in queries.captured_queries) == counted


def test_a_page_past_the_end_is_a_404_in_the_error_shape(client, owner, five_gpus):
    client.force_login(owner)
    response = client.get("/api/devices/?page=9")
    assert response.status_code == 404 and response.json() == {"detail": "Invalid page."}


def test_filtered_lists_page_too(client, owner, five_gpus, settings):
    settings.API_PAGE_SIZE = 1
    ensure_default_group()
    for hour in (9, 11, 13):
        create_reservation(
            owner, title=f"h{hour}", devices=five_gpus[:1], start=tomorrow(hour),
            end=tomorrow(hour + 1),
        )  # fmt: skip
    client.force_login(owner)
    response = client.get("/api/reservations/?user=owner")
    assert response["X-Total-Count"] == "3" and len(response.json()) == 1
    assert "user=owner" in links(response)["next"]


def test_the_schema_documents_the_page_parameters_and_headers(client, owner):
    client.force_login(owner)
    schema = client.get("/api/schema/?format=json").json()
    listing = schema["paths"]["/api/devices/"]["get"]
    assert {"page", "page_size"} <= {p["name"] for p in listing["parameters"]}
    body = listing["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema["components"]["schemas"][body["$ref"].split("/")[-1]]["type"] == "array"
    assert set(listing["responses"]["200"]["headers"]) == {"X-Total-Count", "Link"}
    processes = schema["paths"]["/api/processes/"]["get"]
    assert {"page", "page_size"} <= {p["name"] for p in processes["parameters"]}


@pytest.mark.django_db(transaction=True)
def test_the_client_reads_every_page(live_server, owner, settings):
    settings.API_PAGE_SIZE = 1
    settings.API_MAX_PAGE_SIZE = 2  # the client asks for more; the server's cap wins
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    gpus = [Device.objects.create(host=host, index=i, uuid=f"GPU-{i}") for i in range(5)]
    api = Api(live_server.url, issue_token(owner, "cli")[1])
    pages = []
    api.http.event_hooks["response"].append(pages.append)
    assert [d["id"] for d in api.get("devices/")] == [g.pk for g in gpus]
    assert len(pages) == 3  # pages of the largest size allowed, not of the default


def read_all(client, url) -> list[int]:
    seen = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        seen += [row["id"] for row in response.json()]
        url = links(response).get("next")
    return seen


def test_pages_of_bookings_that_start_together_hold_each_once(client, owner, settings):
    """Many bookings start at the same hour (a lab's Monday 9:00). Pages are cut by offset,
    so the list's order must not leave ties to the database, or a booking comes on two pages
    and another on none (PostgreSQL's sort of a page is not stable)."""
    settings.API_PAGE_SIZE = 7
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    gpus = Device.objects.bulk_create(
        Device(host=host, index=i, uuid=f"GPU-{i}") for i in range(40)
    )
    start = tomorrow(9)
    made = Reservation.objects.bulk_create(
        Reservation(owner=owner, title=f"run {i}", start=start, end=start + timedelta(hours=1))
        for i in range(40)
    )
    ReservedDevice.objects.bulk_create(
        ReservedDevice(reservation=r, device=g, start=r.start, end=r.end)
        for r, g in zip(made, gpus, strict=True)
    )
    client.force_login(owner)
    everything = sorted(r.pk for r in made)
    assert read_all(client, "/api/reservations/") == everything
    day = urlencode({"start": start - timedelta(hours=9), "end": start + timedelta(hours=9)})
    assert read_all(client, f"/api/reservations/?{day}") == everything


def test_pages_of_jobs_made_at_one_moment_hold_each_once_newest_first(
    client, owner, admin_user, settings
):
    """A descending order (newest first) breaks its ties the same way. The owner's list is
    restricted (DISTINCT) and cut by plain offset; an admin's later pages are read by ids
    (core.pagination.FirstPageUncounted) and keep the list's related objects: as many
    queries as the first page."""
    settings.API_PAGE_SIZE = 4
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    jobs = Job.objects.bulk_create(Job(owner=owner, name=f"sweep {i}") for i in range(10))
    Task.objects.bulk_create(
        Task(job=job, host=host, template="t", command="t") for job in jobs for _ in range(2)
    )
    Job.objects.update(created=timezone.now())  # one moment for all: every job ties
    newest_first = sorted((j.pk for j in jobs), reverse=True)
    for user in (owner, admin_user):
        client.force_login(user)
        assert read_all(client, "/api/jobs/") == newest_first
    counts = []
    for page in (1, 2):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/api/jobs/?page={page}")
        assert [len(job["tasks"]) for job in response.json()] == [2] * 4
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1]
