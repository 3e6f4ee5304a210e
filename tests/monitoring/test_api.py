"""The monitoring API: latest metrics, processes, and history with time-range filters."""

from datetime import timedelta

import pytest
from django.utils import timezone

from monitoring.models import Device, GpuMetric, Host, HostMetric, Resolution


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


def test_devices_carry_their_latest_metrics(signed_in, node):
    device = signed_in.get("/api/devices/").json()[0]
    assert device["latest"]["utilization_gpu"] == 7
    assert device["latest"]["power_w"] is None


def test_a_down_hosts_devices_have_no_latest_metrics(signed_in, node):
    node.status = Host.Status.UNREACHABLE
    node.save()
    assert signed_in.get("/api/devices/").json()[0]["latest"] is None
    hosts = {h["name"]: h for h in signed_in.get("/api/hosts/").json()}
    assert hosts["node-1"]["latest"] is None and hosts["node-2"]["latest"] is None


def test_hosts_carry_cpu_and_ram(signed_in, node):
    host = signed_in.get(f"/api/hosts/{node.pk}/").json()
    assert host["latest"]["utilization"] == 3.5


def test_processes_are_listed_and_filtered(signed_in, node):
    rows = signed_in.get("/api/processes/").json()
    device = Device.objects.get(uuid="GPU-1")
    assert rows == [
        {
            "host": "node-1",
            "device": device.pk,
            "gpu_index": 0,
            "gpu_uuid": "GPU-1",
            "pid": 42,
            "user": None,
            "command": "command hidden",  # not the viewer's process (tests/security)
            "memory_mib": 500,
            "owner_text": "unknown owner",
        }
    ]
    assert signed_in.get("/api/processes/?host=node-2").json() == []
    assert signed_in.get("/api/processes/?user=alice").json() == []


TRAIN_3 = {"id": "b508e2673897", "name": "train-3", "runtime": "docker"}
EVAL_7 = {"id": "ccab8193cec2", "name": "eval-7", "runtime": "podman"}


def in_containers(node):
    """node-1's last probe saw alice's labelled container and one of unknown owner."""
    rows = [(43, "alice", "python t.py", TRAIN_3), (44, None, "python e.py", EVAL_7)]
    node.last_snapshot = {
        **node.last_snapshot,
        "processes": [
            {"gpu_uuid": "GPU-1", "pid": pid, "user": user, "command": command}
            | {"memory_mib": 100, "container": container}
            for pid, user, command, container in rows
        ],
    }
    node.save()


def test_a_containers_process_says_which_and_whose(signed_in, node):
    in_containers(node)
    rows = signed_in.get("/api/processes/").json()
    assert [(r["user"], r["container"], r["owner_text"]) for r in rows] == [
        ("alice", TRAIN_3, "alice (container train-3)"),
        (None, EVAL_7, "container eval-7 (owner unknown)"),
    ]
    assert [r["pid"] for r in signed_in.get("/api/processes/?user=alice").json()] == [43]


@pytest.fixture
def series(node):
    device = Device.objects.get(uuid="GPU-1")
    now = timezone.now()
    for minutes, step in ((5, Resolution.RAW), (30, Resolution.RAW), (90, Resolution.MINUTE)):
        GpuMetric.objects.create(
            device=device, step=step, time=now - timedelta(minutes=minutes), utilization_gpu=minutes
        )
    HostMetric.objects.create(host=node, time=now - timedelta(minutes=5), cpu_utilization=12)
    return device, now


def iso(moment):
    return moment.isoformat().replace("+00:00", "Z")


def test_history_defaults_to_the_last_hour_of_raw_samples(signed_in, series):
    device, _ = series
    body = signed_in.get(f"/api/devices/{device.pk}/history/").json()
    assert body["resolution"] == "raw"
    assert [s["utilization_gpu"] for s in body["samples"]] == [30, 5]


def test_history_picks_averages_for_longer_ranges(signed_in, series):
    device, now = series
    since = iso(now - timedelta(days=1))
    body = signed_in.get(f"/api/devices/{device.pk}/history/", {"since": since}).json()
    assert body["resolution"] == "minute"
    assert [s["utilization_gpu"] for s in body["samples"]] == [90]


def test_history_honours_since_until_and_resolution(signed_in, series):
    device, now = series
    query = {
        "since": iso(now - timedelta(minutes=40)),
        "until": iso(now - timedelta(minutes=10)),
        "resolution": "raw",
    }
    body = signed_in.get(f"/api/devices/{device.pk}/history/", query).json()
    assert [s["utilization_gpu"] for s in body["samples"]] == [30]


def test_host_history(signed_in, series, node):
    body = signed_in.get(f"/api/hosts/{node.pk}/history/").json()
    assert [s["cpu_utilization"] for s in body["samples"]] == [12]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-13-01T00:00:00Z"}, "until"),
        ({"since": "2026-03-02T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, "since"),
        ({"resolution": "second"}, "resolution"),
        ({"since": "2020-01-01T00:00:00Z", "resolution": "raw"}, "resolution"),
        ({"until": "0001-01-01T00:30:00Z"}, "until"),
    ],
)
def test_bad_history_queries_get_a_400_naming_the_field(signed_in, series, query, field):
    device, _ = series
    response = signed_in.get(f"/api/devices/{device.pk}/history/", query)
    assert response.status_code == 400
    assert field in response.json()


def test_history_of_an_unknown_device_is_404(signed_in, db):
    assert signed_in.get("/api/devices/999/history/").status_code == 404


@pytest.mark.parametrize("url", ["/api/processes/", "/api/devices/1/history/"])
def test_anonymous_users_get_nothing(client, node, url):
    assert client.get(url).status_code == 403
