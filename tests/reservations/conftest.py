import pytest

from accesscontrol.services import ensure_default_group
from monitoring.models import Device, Host


@pytest.fixture
def gpus(db):
    host = Host.objects.create(name="node-1", address="10.0.0.1")
    return [Device.objects.create(host=host, index=i, uuid=f"GPU-{i}") for i in range(4)]


@pytest.fixture
def everyone_may_book(db, owner, other_user):
    ensure_default_group()
