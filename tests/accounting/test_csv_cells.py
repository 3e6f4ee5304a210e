"""The usage CSV opens in spreadsheets: no cell made of names may run as a formula there."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model

from accounting import rollup
from accounting.views import spreadsheet_safe

from .conftest import DAY, NOW

PAGE = "/usage/"
WINDOW = {"start": "2026-03-10", "end": "2026-03-10", "format": "csv"}


@pytest.mark.parametrize(
    "text, cell",
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("alice", "alice"),
        ("node-1", "node-1"),
        (-1.5, -1.5),  # figures stay figures
    ],
)
def test_text_that_starts_a_formula_is_quoted(text, cell):
    assert spreadsheet_safe(text) == cell


def test_a_user_named_like_a_formula_is_exported_as_text(client, admin_user, history, owner):
    # Before: "-2+3" went out as is, and a spreadsheet computed it (or ran worse).
    get_user_model().objects.filter(pk=owner.pk).update(username="-2+3")
    rollup.compute_day(DAY, NOW)
    client.force_login(admin_user)
    answer = client.get(PAGE, WINDOW)
    names = [row["name"] for row in csv.DictReader(io.StringIO(answer.content.decode()))]
    assert "'-2+3" in names and "-2+3" not in names
