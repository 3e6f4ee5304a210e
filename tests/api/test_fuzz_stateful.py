"""Schemathesis' stateful phase over the committed schema, in-process, as an admin.

Calls are chained through the links schemathesis infers from the schema (what one answer
creates, the next one reads, changes or deletes), so generated ids hit real objects rather
than 404s. Every answer must not be a 5xx, must match the schema, and the API must agree
with its own schema about bad input (``negative_data_rejection``: a value the schema forbids
is refused) and about what it created (``use_after_free``, ``ensure_resource_availability``).
"""

import pytest
from django.db import transaction
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import negative_data_rejection
from schemathesis.specs.openapi.checks import ensure_resource_availability, use_after_free

from apitokens.services import issue_token

from .test_fuzz import (  # noqa: F401
    CHECKS,
    EXAMPLES,
    EXPLORE,
    as_admin,
    fuzz_lab,
    impatient,
    in_test_transaction,
    no_token_throttle,
)

STATEFUL_CHECKS = [*CHECKS, negative_data_rejection, use_after_free, ensure_resource_availability]


@pytest.mark.parametrize("persona", ["admin_user"])
def test_chained_calls_agree_with_the_schema(
    persona,
    admin_user,
    fuzz_lab,  # noqa: F811 (these four: fixtures, imported)
    no_token_throttle,  # noqa: F811
    in_test_transaction,  # noqa: F811
    impatient,  # noqa: F811
):
    headers = {
        "Authorization": f"Bearer {issue_token(admin_user, 'stateful')[1]}",
        "Accept-Encoding": "identity",  # the WSGI transport does not decompress
    }

    class Workflow(as_admin.as_state_machine()):
        # Each scenario starts from the same rows (a savepoint rolled back after it), so a
        # scenario hypothesis replays finds what it found the first time.
        def setup(self):
            self.savepoint = transaction.savepoint()

        def teardown(self):
            transaction.savepoint_rollback(self.savepoint)

        def get_call_kwargs(self, case):
            return {"headers": headers}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=STATEFUL_CHECKS)

    Workflow.run(
        settings=hypothesis_settings(
            max_examples=EXAMPLES * 10,  # about 40 s on two cores
            stateful_step_count=6,
            derandomize=not EXPLORE,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
