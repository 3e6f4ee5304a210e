"""/metrics: the token check, and content read back with Prometheus' own text parser."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitoring.models import Device, Host
from tests.monitoring.conftest import SNAPSHOT

TOKEN = "s3cret-token"


@pytest.fixture
def lab(node):
    """node-1 up (with a lost GPU), node-2 down but still holding its last snapshot."""
    disks = [{"path": "/", "total_mib": 100_000, "used_mib": 40_000}]
    Host.objects.filter(pk=node.pk).update(
        last_probe_seconds=0.25, last_snapshot={**SNAPSHOT, "disks": disks}
    )
    Device.objects.create(host=node, index=1, uuid="GPU-2", name="Tesla T4", status="lost")
    down = Host.objects.get(name="node-2")
    down.last_snapshot = {**SNAPSHOT, "disks": disks}
    down.save()
    return node, down


def scrape(client, token=TOKEN):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.get("/metrics", **headers)


def samples(response) -> dict:
    """{(metric name, frozenset(labels)): value} as Prometheus reads the page."""
    text = response.content.decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_it_is_off_without_a_token_setting(client, lab, settings):
    settings.METRICS_TOKEN = ""
    response = scrape(client)
    assert response.status_code == 403
    assert b"METRICS_TOKEN" in response.content


@pytest.mark.parametrize("token", [None, "wrong", TOKEN + "x", TOKEN[:-1]])
def test_it_refuses_a_missing_or_wrong_token(client, lab, settings, token):
    settings.METRICS_TOKEN = TOKEN
    assert scrape(client, token).status_code == 403


def test_it_exports_gpu_and_host_gauges(client, lab, settings):
    settings.METRICS_TOKEN = TOKEN
    response = scrape(client)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    got = samples(response)
    gpu = frozenset({"host": "node-1", "gpu": "0", "uuid": "GPU-1", "model": "Tesla T4"}.items())
    assert got[("hive_gpu_utilization_percent", gpu)] == 7
    assert got[("hive_gpu_memory_used_bytes", gpu)] == 512 * 1024 * 1024
    assert got[("hive_gpu_temperature_celsius", gpu)] == 40
    assert got[("hive_gpu_processes", gpu)] == 1
    assert ("hive_gpu_power_watts", gpu) not in got  # the GPU could not tell: no sample
    node1, node2 = frozenset({"host": "node-1"}.items()), frozenset({"host": "node-2"}.items())
    assert got[("hive_host_up", node1)] == 1 and got[("hive_host_up", node2)] == 0
    assert got[("hive_host_probe_duration_seconds", node1)] == 0.25
    assert got[("hive_host_cpu_utilization_percent", node1)] == 3.5
    # a down host's stale snapshot is not exported as if it were current
    assert ("hive_host_cpu_utilization_percent", node2) not in got
    root = frozenset({"host": "node-1", "path": "/"}.items())
    assert got[("hive_host_disk_used_bytes", root)] == 40_000 * 1024 * 1024
    assert got[("hive_host_disk_total_bytes", root)] == 100_000 * 1024 * 1024
    assert not [key for key in got if key[0].startswith("hive_host_disk") and node2 <= key[1]]
    lost = frozenset({"host": "node-1", "gpu": "1", "uuid": "GPU-2", "model": "Tesla T4"}.items())
    assert got[("hive_gpu_present", lost)] == 0 and got[("hive_gpu_present", gpu)] == 1


def test_it_only_answers_get(client, lab, settings):
    settings.METRICS_TOKEN = TOKEN
    response = client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 405


def test_it_also_exports_the_dcgm_exporters_names(client, lab, settings):
    settings.METRICS_TOKEN = TOKEN
    got = samples(scrape(client))
    gpu = frozenset(
        {"gpu": "0", "UUID": "GPU-1", "device": "nvidia0", "modelName": "Tesla T4",
         "Hostname": "node-1"}.items()
    )  # fmt: skip
    assert got[("DCGM_FI_DEV_GPU_UTIL", gpu)] == 7
    assert got[("DCGM_FI_DEV_FB_USED", gpu)] == 512
    assert got[("DCGM_FI_DEV_GPU_TEMP", gpu)] == 40
    assert ("DCGM_FI_DEV_POWER_USAGE", gpu) not in got
