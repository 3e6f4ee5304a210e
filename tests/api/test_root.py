"""GET /api/ lists the API's collections, each linked to the API, never to a page of the same
name (the API's route names live in their own namespace, `api:`)."""

from django.urls import reverse


def test_the_api_root_links_each_collection_to_the_api(client, owner):
    client.force_login(owner)
    links = client.get("/api/", HTTP_ACCEPT="application/json").json()
    assert links["jobs"] == "http://testserver/api/jobs/"
    assert links["placement"] == "http://testserver/api/placement/"
    assert all(url.startswith("http://testserver/api/") for url in links.values())


def test_pages_and_api_routes_have_distinct_names(db):
    assert reverse("job-list") == "/jobs/"
    assert reverse("api:job-list") == "/api/jobs/"
    assert reverse("api:api-root") == "/api/"
