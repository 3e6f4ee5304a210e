"""Shared fixtures: personas for permission tests and an isolated data directory."""

import pytest
from django.contrib.auth import get_user_model


@pytest.fixture(autouse=True)
def _isolated_data_dir(settings, tmp_path_factory):
    """Keys and other files written by the code under test go to a per-session temp dir."""
    data = tmp_path_factory.getbasetemp() / "hive-data"
    data.mkdir(exist_ok=True)
    settings.HIVE_DATA_DIR = data
    settings.SSH_KEY_PATH = data / "ssh" / "id_ed25519"


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("owner", "owner@example.org", "pw-owner-1")


@pytest.fixture
def other_user(db):
    return get_user_model().objects.create_user("other", "other@example.org", "pw-other-1")


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_superuser("boss", "boss@example.org", "pw-boss-1")
