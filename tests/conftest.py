"""Shared fixtures: personas for permission tests and an isolated data directory."""

import pytest
from django.contrib.auth import get_user_model


@pytest.fixture(scope="session")
def hive_data_dir(tmp_path_factory):
    """The data directory of the service under test (keys, generated files)."""
    return tmp_path_factory.mktemp("hive-data")


@pytest.fixture(autouse=True)
def _isolated_data_dir(settings, hive_data_dir):
    settings.HIVE_DATA_DIR = hive_data_dir
    settings.SSH_KEY_PATH = hive_data_dir / "ssh" / "id_ed25519"


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("owner", "owner@example.org", "pw-owner-1")


@pytest.fixture
def other_user(db):
    return get_user_model().objects.create_user("other", "other@example.org", "pw-other-1")


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_superuser("boss", "boss@example.org", "pw-boss-1")
