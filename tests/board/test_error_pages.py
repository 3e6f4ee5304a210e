"""Error pages in the site's design: the reason and what to do, never internals."""

from django.test import Client
from django.urls import reverse

from core.api_errors import server_error


def test_a_refused_page_says_why_and_what_to_do(client, owner):
    client.force_login(owner)
    response = client.get(reverse("reservations-usage"))
    html = response.content.decode()
    assert response.status_code == 403
    assert "You may not open this page" in html and "Only staff may see everyone" in html
    assert "ask an admin" in html and 'class="navbar' in html  # the site's menu is there


def test_an_unknown_page_is_a_designed_404(client, owner):
    client.force_login(owner)
    response = client.get("/hosts/no-such-host/")
    html = response.content.decode()
    assert response.status_code == 404
    assert "There is nothing here" in html and "Host matches" not in html


def test_the_api_keeps_its_json_404(client, owner):
    client.force_login(owner)
    response = client.get("/api/no-such-thing/")
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}


def test_a_form_without_its_token_gets_the_designed_csrf_page(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    response = client.post(reverse("reservations-feed-renew"))
    html = response.content.decode()
    assert response.status_code == 403
    assert "This form was not accepted" in html and "reload the page" in html
    assert "CSRF token missing" not in html  # Django's technical reason stays out


def test_a_server_error_page_shows_no_internals(rf):
    response = server_error(rf.get("/jobs/"))
    html = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on our side" in html and "Traceback" not in html
