"""Probing over a real OpenSSH sshd, with fake nvidia-smi output naming real processes."""

import os
import pwd
import socket
import time

from django.core.management import call_command

from monitoring.connections import pool
from monitoring.inventory import probe_and_record
from monitoring.models import Device, Host
from tests import leftovers
from tests.monitoring.conftest import make_host
from tests.realparts import Sshd, require

LONG_USER = "gpuhive-longname-user"
UUID0 = "GPU-10fb0fbd-2696-43f3-467f-d280d906a107"
UUID1 = "GPU-d1df4664-bb44-189c-7ad0-ab86c8cb30e2"


def gpu_row(index, uuid, used=1000, name="NVIDIA A100-SXM4-40GB"):
    return f"{index}, {uuid}, 40960, {used}, 37, 5, 41, 61.52, {name}"


def accepted_logins(sshd) -> int:
    return sshd.log.read_text().count("Accepted publickey")


def test_it_records_the_host_key_at_first_contact(ssh_host, sshd, gpus):
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    result = probe_and_record(ssh_host)
    ssh_host.refresh_from_db()
    assert result.reachable, result.error
    assert ssh_host.host_key == sshd.public_host_key()
    assert ssh_host.host_key_type == "ssh-ed25519"
    assert ssh_host.host_key_fingerprint.startswith("SHA256:")


def test_it_reports_gpus_and_real_process_owners(ssh_host, gpus, real_processes):
    me = pwd.getpwuid(os.getuid()).pw_name
    mine = real_processes(["sleep", "301"])
    fake = gpus("127.0.0.2")
    fake.set_gpus([gpu_row(0, UUID0, used=2048), gpu_row(11, UUID1, name="Tesla V100, PCIe")])
    fake.set_processes([f"{UUID0}, {mine.pid}, 2000, /usr/bin/python3", f"{UUID1}, 999999, 17, x"])
    result = probe_and_record(ssh_host)
    assert result.error is None
    assert [g.index for g in result.gpus] == [0, 11]
    assert result.gpus[1].name == "Tesla V100, PCIe"
    assert result.gpus[0].power_w == 61.52
    by_pid = {p.pid: p for p in result.processes}
    assert by_pid[mine.pid].user == me
    assert by_pid[mine.pid].command == "sleep 301"
    # Its /proc/PID/cgroup, read by the probe over SSH, is no container's.
    assert by_pid[mine.pid].container is None
    # a PID that ps cannot see (another PID namespace) has an unknown owner, not a guess
    assert by_pid[999999].user is None
    assert result.cpu["memory_total_mib"] > 0
    assert set(Device.objects.values_list("index", flat=True)) == {0, 11}


def test_it_shows_full_long_user_names(ssh_host, gpus, real_processes):
    require(os.geteuid() == 0, "starting a process as another user needs root")
    require(_user_exists(LONG_USER), f"user {LONG_USER} does not exist (.ci/run creates it)")
    theirs = real_processes(["sleep", "302"], user=LONG_USER)
    fake = gpus("127.0.0.2")
    fake.set_gpus([gpu_row(0, UUID0)])
    fake.set_processes([f"{UUID0}, {theirs.pid}, 100, sleep"])
    result = probe_and_record(ssh_host)
    assert [p.user for p in result.processes] == [LONG_USER]


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def test_it_marks_a_vanished_gpu_lost_and_keeps_it(ssh_host, gpus):
    fake = gpus("127.0.0.2")
    fake.set_gpus([gpu_row(0, UUID0), gpu_row(1, UUID1)])
    probe_and_record(ssh_host)
    fake.set_gpus([gpu_row(0, UUID0)])
    probe_and_record(ssh_host)
    lost = Device.objects.get(uuid=UUID1)
    assert lost.status == Device.Status.LOST
    fake.set_gpus([gpu_row(0, UUID0), gpu_row(1, UUID1)])
    probe_and_record(ssh_host)
    assert Device.objects.get(uuid=UUID1).status == Device.Status.PRESENT
    assert Device.objects.count() == 2


def test_it_reuses_one_connection_across_probes(ssh_host, sshd, gpus):
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    before = accepted_logins(sshd)
    assert probe_and_record(ssh_host).reachable  # first contact records the key
    for _ in range(3):
        ssh_host.refresh_from_db()  # as the monitoring loop reloads hosts each cycle
        assert probe_and_record(ssh_host).reachable
    assert accepted_logins(sshd) - before == 1


def test_it_refuses_a_changed_host_key(db, sshd, tmp_path, settings, gpus):
    settings.SSH_CONNECT_TIMEOUT = 3
    gpus("127.0.0.1").set_gpus([gpu_row(0, UUID0)])
    impostor = Sshd(tmp_path / "impostor", "", tmp_path).start()
    try:
        host = make_host(sshd, "node-1", "127.0.0.1")
        assert probe_and_record(host).reachable
        host.refresh_from_db()
        recorded = host.host_key
        host.port = impostor.port  # same address, a server with another key
        host.save()
        pool.close()
        result = probe_and_record(host)
    finally:
        impostor.stop()
    host.refresh_from_db()
    assert not result.reachable
    assert host.status == Host.Status.HOST_KEY_CHANGED
    assert "host key changed" in host.last_error
    assert host.host_key == recorded


def test_it_reports_failed_authentication(db, sshd, settings):
    settings.SSH_CONNECT_TIMEOUT = 3
    host = Host.objects.create(name="n", address="127.0.0.2", port=sshd.port, username="nobody")
    result = probe_and_record(host)
    assert result.status == Host.Status.AUTH_FAILED
    assert "authorized_keys" in result.error


def test_a_dead_host_is_unreachable_within_the_timeout_and_others_probe_fine(
    ssh_host, sshd, settings, gpus
):
    """(That the loop probes the others meanwhile: test_loop's dead-host test.)"""
    settings.SSH_CONNECT_TIMEOUT = 1.5
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    # A server that accepts TCP but never speaks SSH: the worst kind of dead.
    silent = socket.socket()
    silent.bind(("127.0.0.3", 0))
    silent.listen()
    dead = Host.objects.create(name="dead", address="127.0.0.3", port=silent.getsockname()[1])
    refused = Host.objects.create(name="refused", address="127.0.0.1", port=1)
    started = time.monotonic()
    try:
        results = [probe_and_record(host) for host in (dead, refused, ssh_host)]
    finally:
        silent.close()
    elapsed = time.monotonic() - started
    assert [r.reachable for r in results] == [False, False, True]
    assert "timed out" in results[0].error or "banner" in results[0].error
    assert "connection refused" in results[1].error
    assert elapsed < 1.5 * 3  # bounded by the connect timeout: the dead host is given up on
    dead.refresh_from_db()
    assert dead.status == Host.Status.UNREACHABLE


def test_a_hung_nvidia_smi_times_out_and_flags_the_host(ssh_host, settings, gpus):
    settings.NVIDIA_SMI_TIMEOUT = 1
    gpus("127.0.0.2").set_mode("hang")
    result = probe_and_record(ssh_host)
    ssh_host.refresh_from_db()
    assert result.reachable
    assert ssh_host.status == Host.Status.ERROR
    assert "nvidia-smi hung" in ssh_host.last_error


def test_a_host_without_nvidia_smi_is_monitored_as_cpu_only(ssh_host, gpus):
    gpus("127.0.0.2").set_mode("missing")
    result = probe_and_record(ssh_host)
    ssh_host.refresh_from_db()
    assert ssh_host.status == Host.Status.UP
    assert result.gpus == [] and result.cpu["utilization"] is not None
    assert "CPU-only" in result.error


def test_it_reconnects_after_the_server_restarts(ssh_host, sshd, gpus):
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    assert probe_and_record(ssh_host).reachable
    sshd.stop()
    try:
        assert not probe_and_record(ssh_host, force=True).reachable
    finally:
        sshd.start()
        leftovers.keep(sshd.proc.pid)  # the session's sshd again: its fixture stops it
    ssh_host.refresh_from_db()
    assert probe_and_record(ssh_host, force=True).reachable


def test_the_doctor_checks_a_host(ssh_host, gpus, capsys):
    gpus("127.0.0.2").set_gpus([gpu_row(0, UUID0)])
    try:
        call_command("doctor", "node-2")
    except Exception as exc:  # screen may be missing locally; the output still says so
        assert "check(s) failed" in str(exc)
    out = capsys.readouterr().out
    assert "ok   login: logged in as" in out
    assert "ok   nvidia-smi:" in out
