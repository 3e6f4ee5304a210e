"""Scripts read times in the reader's zone through one module (static/js/time.js): every
page hands it the zone, no other script converts times its own way, and the job form names
the zone where times are entered. The browser tests (tests/browser/test_calendar_zones.py)
run the conversion in browsers set to other zones."""

import re
from pathlib import Path

import pytest
from django.conf import settings

from accesscontrol.services import profile_for

SCRIPTS = Path(settings.BASE_DIR) / "static" / "js"
# What reads or writes a Date's browser-local fields, or formats in a zone: time.js's job.
OWN_CONVERSION = re.compile(
    r"getTimezoneOffset|\.(get|set)(FullYear|Month|Date|Day|Hours|Minutes)\(|"
    r"toISOString\(\)\.(slice|substring)|Intl\.DateTimeFormat|toLocale\w*String"
)


def test_only_time_js_converts_between_zones_and_instants():
    scripts = [p for p in SCRIPTS.glob("*.js") if p.name != "time.js"]
    offenders = [
        f"{path.name}:{number}"
        for path in scripts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if OWN_CONVERSION.search(line)
    ]
    assert scripts and not offenders, offenders


@pytest.fixture
def in_new_york(owner):
    profile = profile_for(owner)
    profile.time_zone = "America/New_York"
    profile.save()
    return owner


@pytest.mark.parametrize("url", ["/jobs/new/", "/jobs/new/rows/"])
def test_the_job_forms_hand_over_and_name_the_readers_zone(client, in_new_york, url):
    client.force_login(in_new_york)
    html = client.get(url).content.decode()
    assert 'data-zone="America/New_York"' in html
    assert "Times in <strong>America/New_York</strong>" in html


def test_a_page_without_a_reader_hands_over_the_site_zone(db, client, settings):
    settings.TIME_ZONE = "Asia/Tokyo"  # the site's zone (SITE_TIME_ZONE) at start-up
    html = client.get("/accounts/login/").content.decode()
    assert 'data-zone="Asia/Tokyo"' in html
