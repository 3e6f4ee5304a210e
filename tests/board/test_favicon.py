"""The site's icon: linked from every page of ours, and /favicon.ico for the pages that do not
link one (the admin, the browsable API), so no browser console shows a 404 for it."""

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders


@pytest.mark.parametrize("who", ["anonymous", "owner", "other_user", "admin_user"])
def test_favicon_ico_leads_everyone_to_the_svg_icon(client, request, who):
    if who != "anonymous":
        client.force_login(request.getfixturevalue(who))
    response = client.get("/favicon.ico")
    assert response.status_code == 302
    assert response["Location"] == f"{settings.STATIC_URL}img/hive.svg"
    assert finders.find("img/hive.svg").endswith("static/img/hive.svg")


def test_every_page_links_the_icon(client, owner):
    client.force_login(owner)
    html = client.get("/").content.decode()
    icon = f'<link rel="icon" href="{settings.STATIC_URL}img/hive.svg" type="image/svg+xml">'
    assert icon in html
