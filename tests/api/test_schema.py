"""The OpenAPI schema: committed, current, and served with Swagger UI from our own files."""

import difflib
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders

COMMITTED = settings.BASE_DIR / "schema" / "openapi.yaml"


def test_the_committed_schema_matches_the_code(tmp_path):
    """Generated as bin/schema does, on the default profile: integer bounds in the schema
    come from the database backend (PostgreSQL's differ from SQLite's)."""
    generated = tmp_path / "openapi.yaml"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["HIVE_DATA_DIR"] = str(tmp_path / "data")
    argv = [sys.executable, "manage.py", "spectacular", "--file", str(generated)]
    subprocess.run(
        [*argv, "--validate", "--fail-on-warn"], cwd=settings.BASE_DIR, env=env, check=True
    )
    new, old = generated.read_text(), COMMITTED.read_text()
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), n=1))
    assert new == old, (
        "schema/openapi.yaml is not what the code generates: run bin/schema and commit it.\n"
        + diff[:4000]
    )


@pytest.mark.parametrize("persona", [None, "owner", "other_user", "admin_user"])
def test_the_schema_and_swagger_ui_are_open_to_all(client, db, persona, request):
    if persona:
        client.force_login(request.getfixturevalue(persona))
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/reservations/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200


def test_swagger_ui_comes_from_our_static_files(client, db):
    html = client.get("/api/docs/").content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower()
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
