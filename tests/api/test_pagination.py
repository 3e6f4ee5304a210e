"""Every API list answers in pages (issue 20): the body stays an array, the paging is in the
Link and X-Total-Count headers; the page size is a setting; the `hive` client reads on."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hive_cli.api import Api

from accesscontrol.services import ensure_default_group
from apitokens.services import issue_token
from monitoring.models import Device, Host
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
    assert len(client.get("/api/devices/?page_size=bad").json()) == 2


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
