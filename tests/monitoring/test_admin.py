"""The host list in the admin: GPU counts shown, in a number of queries that does not grow."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from monitoring.models import Device, Host

pytestmark = pytest.mark.django_db


def add_hosts(count, start=0):
    for n in range(start, start + count):
        host = Host.objects.create(name=f"node-{n}", address=f"10.0.0.{n + 1}")
        for index in range(3):
            status = Device.Status.LOST if index == 2 else Device.Status.PRESENT
            Device.objects.create(host=host, index=index, uuid=f"GPU-{n}-{index}", status=status)


def changelist_queries(client) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/admin/monitoring/host/")
    assert page.status_code == 200
    return len(queries), page.content.decode()


def test_the_host_list_counts_present_gpus_without_a_query_per_host(client, admin_user):
    client.force_login(admin_user)
    add_hosts(1)
    few, html = changelist_queries(client)
    assert '<td class="field-gpu_count">2</td>' in html  # the lost GPU is not counted
    add_hosts(6, start=1)
    many, html = changelist_queries(client)
    assert html.count('<td class="field-gpu_count">2</td>') == 7
    assert many == few
