"""Schemathesis over every operation of the committed schema, in-process (WSGI).

As a normal user and as an admin (each with a personal token), every generated request must
get an answer that is not a 5xx and that matches the schema: status code, content type and
body. The committed schema is the code's (see test_schema), so this fuzzes the real API.

Most requests come from schemathesis' coverage phase: for each operation, each field's
boundary values (positive) and each way to break it (negative: wrong types, missing or
extra properties, values out of range). The admin gets both, since only an admin reaches
every operation's validation; the user gets the positive ones, which go on past validation
into the user's own rules (grants, bookings), while a broken value is refused by the same
serializer for both. HIVE_FUZZ_EXPLORE=1 gives the user the negative ones too.
"""

import os

import pytest
import schemathesis
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from rest_framework.throttling import ScopedRateThrottle
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accesscontrol.services import ensure_default_group
from apitokens.services import issue_token
from monitoring.models import Device, Host
from reservations.services import create_reservation

from .conftest import tomorrow

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Enough to reach each operation's error paths (with about 60 operations x 2 personas, 5 each
# keep the file near two minutes on two cores). The suite's run is derandomized, so CI asks
# the same requests every time and a failure reproduces; set HIVE_FUZZ_EXPLORE=1 (and
# HIVE_FUZZ_EXAMPLES=300, say) to search with fresh random ones.
EXAMPLES = int(os.environ.get("HIVE_FUZZ_EXAMPLES", "5"))
EXPLORE = os.environ.get("HIVE_FUZZ_EXPLORE") == "1"


def load_schema(coverage: str | None, app=None):
    """The committed schema, its coverage phase asking ``coverage`` cases ("positive",
    "negative" or "all"; None leaves the phase out)."""
    phase = {"generation": {"mode": coverage}} if coverage else {"enabled": False}
    config = SchemathesisConfig.from_dict({"phases": {"coverage": phase}})
    loaded = schemathesis.openapi.from_path(
        settings.BASE_DIR / "schema" / "openapi.yaml", config=config
    )
    loaded.app = app
    return loaded


application = get_wsgi_application()
as_admin = load_schema("all", application)
as_user = load_schema("all" if EXPLORE else "positive", application)


@pytest.fixture
def fuzz_lab(owner, other_user, admin_user):
    """Objects with low ids, so generated ids hit real ones. Hosts point at a closed loopback
    port: a fuzzed "spawn" or port pick fails at once instead of waiting on the network."""
    ensure_default_group()
    host = Host.objects.create(name="node-1", address="127.0.0.1", port=9, status=Host.Status.UP)
    gpus = [Device.objects.create(host=host, index=i, uuid=f"GPU-{i}") for i in range(2)]
    create_reservation(owner, title="ours", devices=gpus, start=tomorrow(9), end=tomorrow(12))
    create_reservation(
        other_user, title="theirs", devices=gpus, start=tomorrow(13), end=tomorrow(14)
    )
    return gpus


@pytest.fixture
def in_test_transaction():
    """Requests through the WSGI app end by closing the database connection, which would
    close the test's transaction; Django's test client switches that off the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def no_token_throttle(monkeypatch):
    """The token endpoints' rate limit would answer most fuzzed calls with 429."""
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"tokens": "100000/minute"})


@pytest.fixture
def auth(persona, request, fuzz_lab):
    """A personal token of the persona, as a header."""
    secret = issue_token(request.getfixturevalue(persona), "fuzz")[1]
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def impatient(settings):
    """No workers run here: a port pick waits for their answer this long, then says so."""
    settings.WORKER_ANSWER_SECONDS = 0.2


def fuzz_settings(examples: int) -> hypothesis_settings:
    """Hypothesis' settings for a fuzz test: ``examples`` generated requests per operation
    (besides the schema's examples and the coverage phase), the same ones on every run
    unless HIVE_FUZZ_EXPLORE=1."""
    return hypothesis_settings(
        max_examples=examples,
        derandomize=not EXPLORE,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def call_and_validate(case, auth):
    # Schemathesis' WSGI transport asks for gzip but does not decompress as HTTP clients do.
    case.call_and_validate(headers={**auth, "Accept-Encoding": "identity"}, checks=CHECKS)


@pytest.mark.parametrize("persona", ["admin_user"])
@as_admin.parametrize()
@fuzz_settings(EXAMPLES)
def test_no_operation_fails_or_breaks_the_schema_for_an_admin(
    case, auth, no_token_throttle, in_test_transaction, impatient
):
    call_and_validate(case, auth)


@pytest.mark.parametrize("persona", ["owner"])
@as_user.parametrize()
@fuzz_settings(EXAMPLES)
def test_no_operation_fails_or_breaks_the_schema_for_a_user(
    case, auth, no_token_throttle, in_test_transaction, impatient
):
    call_and_validate(case, auth)
