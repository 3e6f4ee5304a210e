"""The host page's history charts (js/history.js on js/charts.js): a right axis from the
first point on."""

from datetime import timedelta

import pytest
from django.utils import timezone

from monitoring.models import Device, GpuMetric, Host

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def one_sample(owner):
    host = Host.objects.create(name="node-1", address="127.0.0.9", status=Host.Status.UP)
    device = Device.objects.create(host=host, index=0, uuid="GPU-1", memory_total_mib=81920)
    GpuMetric.objects.create(
        device=device, time=timezone.now() - timedelta(minutes=2), memory_used_mib=80000
    )
    return host


def test_a_history_of_one_point_spans_the_chosen_hour_with_short_labels(
    asgi_live_server, one_sample, page
):
    page.goto(f"{asgi_live_server}/accounts/login/?next=/hosts/node-1/")
    page.fill("input[name=username]", "owner")
    page.fill("input[name=password]", "pw-owner-1")
    page.click("[type=submit]")
    page.wait_for_selector("#history-message:text('1 points')")
    memory = "document.querySelector('#history-chart .chart[data-field=memory_used_mib]').plot"
    x_from, x_to = page.evaluate(f"[{memory}.scales.x.min, {memory}.scales.x.max]")
    assert x_to - x_from == pytest.approx(3600, abs=5)  # the last hour, not years around it
    assert x_to == pytest.approx(timezone.now().timestamp(), abs=30)
    assert page.evaluate(f"{memory}.axes[1].values({memory}, [40000, 80000])") == ["40k", "80k"]

    page.select_option("#history-range", "168")
    page.wait_for_function(f"{memory}.scales.x.max - {memory}.scales.x.min > 600000")
