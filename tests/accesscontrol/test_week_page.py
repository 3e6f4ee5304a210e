"""The week grid page: permission matrix, what it shows, bad input, bans at once."""

from datetime import date, time

import pytest

from accesscontrol.models import Grant, Window
from accesscontrol.services import ban_user

URL = "/access/week/"


@pytest.fixture
def weekday_grant(warsaw, owner, node1):
    grant = Grant.objects.create(name="g", scope="hosts", valid_from=date(2025, 1, 1))
    grant.users.add(owner)
    grant.hosts.add(node1)
    Window.objects.create(grant=grant, weekdays="01234", start=time(8), end=time(16))
    return grant


@pytest.mark.parametrize(
    ("persona", "own", "others"),
    [
        ("anonymous", 302, 302),
        ("user", 200, 200),  # "others" is the owner themself here
        ("other_user", 200, 403),
        ("host_admin", 200, 200),
        ("superuser", 200, 200),
    ],
)
def test_it_lets_only_admins_and_host_admins_look_at_others(
    client, login_as, owner, weekday_grant, persona, own, others
):
    login_as(persona)
    assert client.get(URL).status_code == own
    assert client.get(URL, {"user": owner.pk}).status_code == others


def test_it_shades_the_owners_weekday_hours_in_local_time(client, login_as, weekday_grant):
    login_as("user")
    page = client.get(URL, {"week": "2025-03-26"}).content.decode()
    assert "Mon 24 Mar" in page and "Sun 30 Mar" in page
    assert page.count("08:00–16:00") == 2 * 5  # bar titles and labels, Monday to Friday
    assert "node-1:0, node-1:1" in page  # identical coverage: one row
    assert "Times in Europe/Warsaw" in page


def test_it_shows_host_admins_only_their_hosts_when_looking_at_others(
    client, login_as, owner, weekday_grant, node2
):
    login_as("host_admin")
    page = client.get(URL, {"user": owner.pk}).content.decode()
    assert "node-1:0" in page and "node-2:0" not in page
    login_as("superuser")
    assert "node-2:0" in client.get(URL, {"user": owner.pk}).content.decode()


def test_it_shows_a_group_its_own_grants(client, login_as, students, warsaw, node1):
    grant = Grant.objects.create(name="g", valid_from=date(2025, 1, 1))
    grant.groups.add(students)
    login_as("superuser")
    page = client.get(URL, {"group": students.pk, "week": "2025-06-04"}).content.decode()
    assert "the group students" in page and "00:00–24:00" in page


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"week": "next tuesday"}, "Enter a valid date."),
        ({"user": "999999"}, "Select a valid choice."),
        ({"user": "abc"}, "Select a valid choice."),
        ({"week": "9999-12-31"}, "Give a date between the years 1900 and 9000."),
        ({"week": "0001-01-01"}, "Give a date between the years 1900 and 9000."),
    ],
)
def test_it_answers_bad_input_with_400_and_a_message(client, login_as, query, message):
    login_as("user")
    response = client.get(URL, query)
    assert response.status_code == 400
    assert message in response.content.decode()


def test_it_refuses_a_user_and_a_group_together(client, login_as, owner, students):
    login_as("superuser")
    response = client.get(URL, {"user": owner.pk, "group": students.pk})
    assert response.status_code == 400
    assert "not both" in response.content.decode()


def test_it_shows_a_ban_at_once_and_no_access(client, login_as, owner, weekday_grant):
    login_as("user")
    assert "08:00–16:00" in client.get(URL, {"week": "2025-06-04"}).content.decode()
    ban_user(owner, "left jobs running on reserved GPUs")
    page = client.get(URL, {"week": "2025-06-04"}).content.decode()
    assert "left jobs running on reserved GPUs" in page
    assert "08:00–16:00" not in page
