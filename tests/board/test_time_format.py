"""One way to show time: the hive_time filters, and no template printing times its own way."""

import re
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.utils import timezone

from core.templatetags.hive_time import day, duration, when, when_relative

ROOT = Path(settings.BASE_DIR)
# |date: is allowed only where a machine reads the text: an <input> value or a query string.
MACHINE_DATE = re.compile(r"""(value|href)="[^"]*\|date:'Y-m-d'""")
# A date or time printed with no filter gets Django's own format ("Nov. 26, 2026").
BARE = re.compile(r"\{\{ ?[\w.]*(start|end|day|date|updated|since|until|_at|created|seen) ?\}\}")


def templates():
    return [p for p in ROOT.glob("*/templates/**/*.html") if ".venv" not in p.parts] + list(
        ROOT.glob("templates/**/*.html")
    )


def test_templates_show_times_only_through_the_hive_time_filters():
    offenders = []
    for path in templates():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            rest = MACHINE_DATE.sub("", line)
            if "|date:" in rest or "|time:" in rest or "|timesince" in rest or BARE.search(rest):
                offenders.append(f"{path.relative_to(ROOT)}:{number}")
    assert templates() and not offenders, offenders


def test_when_is_absolute_in_the_active_zone_with_the_relative_hint():
    moment = timezone.now() + timedelta(hours=2, minutes=1)
    with timezone.override(ZoneInfo("Asia/Tokyo")):
        local = moment.astimezone(ZoneInfo("Asia/Tokyo"))
        assert f">{local:%a %d %b %H:%M}</time>" in when(moment)
        assert 'title="in 2 h' in when(moment)
        assert when_relative(moment).endswith(f"{local:%a %d %b %H:%M} (in 2 h)</time>")
    assert when(None) == "–" and when_relative(None) == "–"


def test_day_names_the_day_like_the_times_and_adds_other_years():
    this_year = timezone.localdate().year
    assert day(date(this_year, 11, 26)) == date(this_year, 11, 26).strftime("%a %d %b")
    assert day(date(2001, 1, 2)) == "Tue 02 Jan 2001"
    with timezone.override(ZoneInfo("Asia/Tokyo")):
        late = datetime(2001, 1, 1, 20, 0, tzinfo=ZoneInfo("UTC"))
        assert day(late) == "Tue 02 Jan 2001"
    assert day(None) == "–"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (30, "under a minute"),
        (3600, "1 h"),
        (timedelta(hours=2, minutes=5), "2 h 5 min"),
        (timedelta(days=1, hours=3), "1 d 3 h"),
        (None, "–"),
    ],
)
def test_durations_read_in_words(value, text):
    assert duration(value) == text
