from tests.monitoring.conftest import node  # noqa: F401
