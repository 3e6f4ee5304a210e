"""Who sees which figures: the page, the CSV and the API, for every persona."""

import pytest

from accounting import rollup

from .conftest import DAY, NOW

PAGE, API = "/usage/", "/api/usage/"
WINDOW = {"start": "2026-03-10", "end": "2026-03-10"}


@pytest.fixture
def figures(history):
    rollup.compute_day(DAY, NOW)


def test_anonymous_visitors_see_nothing(client, figures):
    assert client.get(PAGE, WINDOW).status_code == 302
    assert client.get(API, WINDOW).status_code == 403


def test_a_user_sees_only_their_own_figures(client, owner, figures):
    client.force_login(owner)
    assert [line["name"] for line in client.get(API, WINDOW).json()] == ["owner"]
    page = client.get(PAGE, WINDOW).content.decode()
    assert "Your use" in page and "owner" in page and "other" not in page


def test_another_user_sees_theirs_not_the_owners(client, other_user, figures):
    client.force_login(other_user)
    lines = client.get(API, {**WINDOW, "by": "host"}).json()
    assert [(line["name"], line["used_hours"], line["reserved_hours"]) for line in lines] == [
        ("node-1", 0.5, 0.0)
    ]


def test_an_admin_sees_everyone_and_exports_csv(client, admin_user, figures):
    client.force_login(admin_user)
    names = [line["name"] for line in client.get(API, WINDOW).json()]
    assert names == ["(nobody)", "other", "owner"]
    answer = client.get(PAGE, {**WINDOW, "format": "csv"})
    assert answer["Content-Type"] == "text/csv" and "attachment" in answer["Content-Disposition"]
    lines = answer.content.decode().splitlines()
    assert lines[0] == (
        "period,name,reserved_hours,unbooked_hours,used_hours,idle_hours,energy_kwh,co2e_kg"
    )
    assert lines[-1] == "2026-03-10,owner,2.0,0.0,1.0,1.0,0.25,0.0875"
    assert "2026-03-10,other,0.0,1.5,0.5,0.0,0.05," in lines[2]


@pytest.mark.parametrize(
    "params, field",
    [
        ({"by": "colour"}, "by"),
        ({"period": "decade"}, "period"),
        ({"start": "yesterday"}, "start"),
        ({"end": "2026-13-01"}, "end"),
        ({"start": "2026-03-10", "end": "2026-03-01"}, "end"),
        ({"start": "2020-01-01", "end": "2026-03-01"}, "end"),
    ],
)
def test_bad_choices_get_field_errors_and_no_500(client, owner, figures, params, field):
    client.force_login(owner)
    answer = client.get(API, params)
    assert answer.status_code == 400 and field in answer.json() and answer.json()["detail"]
    assert client.get(PAGE, params).status_code == 400
