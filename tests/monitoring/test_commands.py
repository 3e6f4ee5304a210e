"""The operator's commands: addhost (and hosts files), probe, sshkey, init, serve."""

import json
import os
import shutil
import stat
import subprocess
import sys
import time
import urllib.request
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from core import lease
from monitoring.loop import LOOP_ACTIVITY
from monitoring.models import Device, Host
from tests.realparts import FAKE_BIN, FakeGpus, free_port

ROOT = Path(__file__).resolve().parents[2]
GPU_KEYS = {
    "index",
    "uuid",
    "name",
    "memory_total_mib",
    "memory_used_mib",
    "utilization_gpu",
    "utilization_memory",
    "temperature_c",
    "power_w",
    "mig_enabled",
    "parent_uuid",
    "mig_profile",
    "mig_index",
}


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_adds_a_host(db):
    assert "added node-1" in run("addhost", "node-1", "--address", "10.0.0.1", "--user", "mon")
    host = Host.objects.get(name="node-1")
    assert (host.address, host.port, host.username) == ("10.0.0.1", 22, "mon")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["node-1", "--address", "bad host;rm -rf /"], "address"),
        (["node-1", "--address", "10.0.0.1", "--port", "70000"], "port"),
        (["node 1", "--address", "10.0.0.1"], "name"),
        (["node-1"], "--address is required"),
        ([], "give a host NAME"),
    ],
)
def test_it_refuses_bad_host_input_and_changes_nothing(db, args, message):
    with pytest.raises(CommandError, match=message):
        run("addhost", *args)
    assert not Host.objects.exists()


def test_it_imports_a_toml_hosts_file(db, tmp_path):
    path = tmp_path / "hosts.toml"
    path.write_text(
        '[node-1]\naddress = "10.0.0.1"\n\n[node-2]\naddress = "10.0.0.2"\nport = 2222\n'
        'user = "monitor"\n'
    )
    out = run("addhost", "--file", str(path))
    assert "added node-1" in out and "added node-2" in out
    assert Host.objects.get(name="node-2").port == 2222
    path.write_text('[node-2]\naddress = "10.0.0.22"\n')
    assert "updated node-2" in run("addhost", "--file", str(path))
    assert Host.objects.get(name="node-2").address == "10.0.0.22"


def test_it_imports_an_ini_hosts_file(db, tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu-a]\naddress = 10.1.0.1\nuser = mon\n[gpu-b]\naddress = 10.1.0.2\n")
    run("addhost", "--file", str(path))
    assert sorted(Host.objects.values_list("name", "username")) == [
        ("gpu-a", "mon"),
        ("gpu-b", "root"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[ok]\naddress = "10.0.0.1"\n[bad]\naddress = "10.0.0.2"\nport = "x"\n', "port"),
        ('[ok]\naddress = "10.0.0.1"\n[bad]\nadress = "10.0.0.2"\n', "unknown key"),
        ('[ok]\naddress = "10.0.0.1"\n[bad]\naddress = "no such;host"\n', "address"),
        ("[ok\n", "not valid TOML"),
    ],
)
def test_a_bad_hosts_file_adds_nothing(db, tmp_path, text, message):
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    with pytest.raises(CommandError, match=message):
        run("addhost", "--file", str(path))
    assert not Host.objects.exists()


def test_probe_names_an_unknown_host(db):
    with pytest.raises(CommandError, match="no host named 'ghost'"):
        run("probe", "ghost")


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "name one host, or pass --all"),
        (("localhost", "--all"), "name one host, or pass --all"),
        (("--all", "--json"), "--json prints one host"),
    ],
)
def test_probe_needs_one_host_or_all(db, args, message):
    with pytest.raises(CommandError, match=message):
        run("probe", *args)
    assert not Device.objects.exists()


@pytest.fixture
def local_fake_gpus(tmp_path, monkeypatch):
    """The local transport with the fake nvidia-smi first on PATH."""
    monkeypatch.setenv("PATH", f"{FAKE_BIN}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GPU_DIR", str(tmp_path))
    return FakeGpus(tmp_path, "local")


def test_probe_json_has_the_documented_shape(db, local_fake_gpus):
    Host.objects.create(name="localhost", address="localhost", transport=Host.Transport.LOCAL)
    local_fake_gpus.set_gpus(
        ["0, GPU-abc, 81559, 0, [N/A], [N/A], 30, [N/A], NVIDIA H100 80GB HBM3"]
    )
    local_fake_gpus.set_processes([f"GPU-abc, {os.getpid()}, 100, python"])
    data = json.loads(run("probe", "localhost", "--json"))
    assert set(data) == {
        "host",
        "reachable",
        "error",
        "gpus",
        "slices",
        "processes",
        "cpu",
        "disks",
        "driver_version",
        "cuda_version",
    }
    assert set(data["gpus"][0]) == GPU_KEYS
    assert data["gpus"][0]["power_w"] is None and data["gpus"][0]["utilization_gpu"] is None
    assert data["gpus"][0]["mig_enabled"] is None and data["slices"] == []  # no MIG on it
    assert data["processes"][0]["pid"] == os.getpid()
    assert (
        "pytest" in data["processes"][0]["command"] or "python" in data["processes"][0]["command"]
    )
    assert set(data["cpu"]) == {
        "utilization",
        "memory_total_mib",
        "memory_used_mib",
        "model",
        "cores",
    }
    assert data["cpu"]["cores"] == os.cpu_count()
    assert (data["driver_version"], data["cuda_version"]) == ("535.104.05", "12.2")
    root = shutil.disk_usage("/")
    [disk] = [d for d in data["disks"] if d["path"] == "/"]
    assert set(disk) == {"path", "total_mib", "used_mib"}
    assert disk["total_mib"] == pytest.approx(root.total / 2**20, rel=0.01)
    assert Device.objects.get().uuid == "GPU-abc"


def test_probe_prints_a_table(db, local_fake_gpus):
    Host.objects.create(name="localhost", address="localhost", transport=Host.Transport.LOCAL)
    local_fake_gpus.set_gpus(["0, GPU-abc, 81559, 1024, 12, 3, 30, 70.5, NVIDIA H100 80GB HBM3"])
    out = run("probe", "localhost")
    assert "localhost: reachable" in out
    assert "NVIDIA H100 80GB HBM3" in out and "70.5" in out


def test_probe_all_runs_one_cycle_of_the_loop_and_frees_its_lease(db, local_fake_gpus):
    """What serve's supervisor runs at start, before its workers are up."""
    Host.objects.create(name="localhost", address="localhost", transport=Host.Transport.LOCAL)
    Host.objects.create(name="off", address="no-such-host.invalid", enabled=False)
    local_fake_gpus.set_gpus(["0, GPU-abc, 81559, 1024, 12, 3, 30, 70.5, NVIDIA H100 80GB HBM3"])
    out = run("probe", "--all")
    assert out.startswith("one cycle done by ")
    assert Host.objects.get(name="localhost").last_seen is not None
    assert Host.objects.get(name="off").last_seen is None  # disabled: not probed
    assert Device.objects.get().uuid == "GPU-abc"
    assert lease.holder_of(LOOP_ACTIVITY)[0] == ""  # the loop task takes it at once


def test_probe_all_does_nothing_while_a_loop_holds_the_lease(db, local_fake_gpus):
    Host.objects.create(name="localhost", address="localhost", transport=Host.Transport.LOCAL)
    local_fake_gpus.set_gpus(["0, GPU-abc, 81559, 1024, 12, 3, 30, 70.5, NVIDIA H100 80GB HBM3"])
    assert lease.acquire(LOOP_ACTIVITY, "other-machine:1:loop", 60)
    assert run("probe", "--all").strip() == "another loop holds the lease"
    assert Host.objects.get().last_seen is None
    assert lease.holder_of(LOOP_ACTIVITY)[0] == "other-machine:1:loop"


def test_probe_fails_with_one_line_for_an_unreachable_host(db, settings):
    settings.SSH_CONNECT_TIMEOUT = 2
    Host.objects.create(name="gone", address="no-such-host.invalid")
    out = StringIO()
    with pytest.raises(CommandError) as info:
        call_command("probe", "gone", stdout=out)
    assert str(info.value) == "gone: unreachable: unknown host name 'no-such-host.invalid'"
    assert out.getvalue() == ""  # no table of unknowns


@pytest.fixture
def gpu_less_path(tmp_path, monkeypatch):
    """A PATH with the tools the service needs, and no nvidia-smi: a CPU-only machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "id", "screen", "ps", "timeout"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(bin_dir))


def test_the_doctor_judges_localhost_as_local_and_a_gpu_less_machine_as_cpu_only(db, gpu_less_path):
    Host.objects.create(name="localhost", address="localhost", transport=Host.Transport.LOCAL)
    out = run("doctor", "localhost")  # no CommandError: exit status 0
    assert out.startswith("localhost (this machine, without SSH)\n")
    assert "@localhost:22" not in out
    assert "ok   commands: run here as " in out
    assert "WARN nvidia-smi: no NVIDIA driver: monitored as a CPU-only host" in out
    assert "ok   screen:" in out and "fix:" not in out
    assert out.rstrip().endswith("all checks passed, 1 warning(s)")


def test_the_doctor_fails_when_a_needed_tool_is_missing(db, gpu_less_path):
    os.remove(Path(os.environ["PATH"]) / "screen")
    Host.objects.create(name="localhost", address="localhost", transport=Host.Transport.LOCAL)
    out = StringIO()
    with pytest.raises(CommandError, match="1 check\\(s\\) failed"):
        call_command("doctor", "localhost", stdout=out)
    assert (
        "FAIL screen: not found" in out.getvalue() and "fix: install GNU screen" in out.getvalue()
    )


def test_sshkey_prints_a_public_key_and_keeps_the_private_key_private(db, settings):
    line = run("sshkey").strip()
    assert line.startswith("ssh-ed25519 ") and line.count(" ") == 2
    assert stat.S_IMODE(Path(settings.SSH_KEY_PATH).stat().st_mode) == 0o600
    assert run("sshkey").strip() == line  # generated once, then kept


def test_init_without_input_creates_the_admin_and_localhost(db, tmp_path):
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[node-9]\naddress = "10.0.0.9"\n')
    out = run("init", "--no-input", "--admin", "chief", "--hosts-file", str(hosts))
    assert "Created admin 'chief' with password: " in out
    password = out.split("password: ")[1].split()[0]
    assert get_user_model().objects.get(username="chief").check_password(password)
    assert set(Host.objects.values_list("name", flat=True)) == {"localhost", "node-9"}
    assert run("init", "--no-input", "--first-run") == ""  # already set up: nothing


def test_init_saves_the_public_url(db, settings):
    run("init", "--no-input", "--public-url", "https://gpus.example.org", "--no-localhost")
    text = (Path(settings.HIVE_DATA_DIR) / "hive.env").read_text()
    assert "PUBLIC_URL=https://gpus.example.org" in text
    assert "gpus.example.org" in text.split("ALLOWED_HOSTS=")[1].splitlines()[0]


def test_init_refuses_a_bad_public_url(db):
    with pytest.raises(CommandError, match="not an http"):
        run("init", "--no-input", "--public-url", "gpus.example.org")


def test_serve_runs_web_and_workers_and_stops_both(tmp_path):
    env = {**os.environ, "HIVE_DATA_DIR": str(tmp_path)}
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=ROOT)
    port = free_port()
    serve = subprocess.Popen(
        [*manage, "serve", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        status = _wait_for_http(f"http://127.0.0.1:{port}/admin/login/")
    finally:
        serve.terminate()
        out, _ = serve.communicate(timeout=30)
    assert status == 200, out
    assert serve.returncode == 0, out
    # The workers stopped too (tests/faults/test_serve_stops.py checks every process).
    assert "Stopped." in out


@pytest.mark.parametrize("command", ["serve", "workers"])
def test_serve_and_workers_refuse_to_start_on_failed_checks(tmp_path, command):
    """The checks run in a process of their own (monitoring.supervisor.check_apart): their
    error still reaches the console, and nothing is started."""
    # A lease shorter than the interval parses (a number) but fails monitoring's check.
    env = {**os.environ, "HIVE_DATA_DIR": str(tmp_path), "MONITORING_LEASE_SECONDS": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), command],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "MONITORING_LEASE_SECONDS (1) must be longer than MONITORING_INTERVAL" in done.stderr
    assert "the system checks above failed; nothing was started" in done.stderr
    assert "Serving on" not in done.stdout and "Workers stopped" not in done.stdout


def _wait_for_http(url, seconds=60):
    # A request may take seconds on a loaded machine (the first one loads the URLconf): one
    # given up after 2 s was aborted and asked again, and again, until the deadline.
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            return urllib.request.urlopen(url, timeout=15).status
        except OSError:
            time.sleep(0.3)
    return None
