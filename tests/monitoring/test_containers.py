"""Processes in containers (monitoring/containers.py and monitoring/scripts/containers.sh),
read from real /proc/PID/cgroup captures (tests/fixtures/cgroup, each naming its source) and
a real `podman inspect` line."""

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from monitoring import containers, hostscripts
from monitoring.containers import Container, Facts, Inspected
from monitoring.probes import _interpret, _sections

CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "cgroup"
SHELLS = ["dash", "bash"]


def capture(name: str) -> str:
    """A capture without its header (the "# " lines that say where it comes from)."""
    text = (CAPTURES / name).read_text()
    assert text.startswith("# "), f"{name} does not say where it comes from"
    return "".join(line for line in text.splitlines(True) if not line.startswith("# "))


# Each capture and the container it shows: (runtime, id, rootless uid), or None.
EXPECTED = {
    "docker-v2-systemd.txt": (
        "docker",
        "b508e2673897c4f521d858f56dab18e31ddbfc1f83300fb9793c8a4052af8f05",
        None,
    ),
    "docker-v1-cgroupfs-hybrid.txt": (
        "docker",
        "ff90ed5efd657539ce42198e0d61661d62f2a5d8de9439e2aeb046fb1ef4e0af",
        None,
    ),
    "docker-v1-systemd-centos.txt": (
        "docker",
        "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d",
        None,
    ),
    "docker-v1-some-controllers.txt": (
        "docker",
        "5dace3de0735f73d2b5048f12d41a71741a02e49668de921fdae62f7e65dc498",
        None,
    ),
    "docker-in-docker-v1.txt": (
        "docker",
        "ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a",
        None,
    ),
    "podman-rootful-v1-cgroupfs.txt": (
        "podman",
        "ccab8193cec2f62d40be6f6104fe0283f46cad491055817c797d7c87ea56bb28",
        None,
    ),
    "podman-rootless-v2.txt": (
        "podman",
        "5e22f237b52c26e8845f98ae4e6bf8cdb8fe220ff9d2a904be308d311b4a043a",
        1000,
    ),
    "kubernetes-containerd-bottlerocket.txt": (
        "containerd",
        "f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830",
        None,
    ),
    "kubernetes-crio-v1.txt": (
        "cri-o",
        "d6d725b909f37c3e232aadfbafa950a58bfe7baa579ba8c47a12be88bb921607",
        None,
    ),
    "kubernetes-containerd-1.4-v1.txt": (
        "containerd",
        "d3d8ccf5cca91931c6285c1d7472c413dd5a7700fddc0aa9f89a9ac7008b003e",
        None,
    ),
    "kubernetes-cgroupfs-v1.txt": (
        "kubernetes",
        "da31e536c8d61304a6d5998d163d12400a7a9a1003e1d86369e8fadb022fc17d",
        None,
    ),
    "podman-conmon-v1-cgroupfs.txt": None,
    "podman-unshare-rootless-v2.txt": None,
    "host-v1.txt": None,
    "host-v1-user-session.txt": None,
}


def test_every_capture_has_an_expectation():
    assert sorted(p.name for p in CAPTURES.glob("*.txt")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_it_finds_the_container_of_each_real_capture(name):
    expected = EXPECTED[name]
    found = containers.parse_cgroup(capture(name))
    assert found == (Container(*expected) if expected else None)


def test_the_v2_line_wins_on_a_hybrid_host_and_short_ids_are_twelve_digits():
    outer = "a9a5ad238e59234193ee7ec3fcff5e735b3708ea1068826952255b69e3cfa413"
    text = f"3:pids:/docker/{outer}\n" + capture("docker-v2-systemd.txt")
    found = containers.parse_cgroup(text)
    assert found.id.startswith("b508e2673897") and found.short_id == "b508e2673897"


def test_the_cgroups_section_names_the_probe_and_each_pid():
    section = (
        "probe\n0::/user.slice/user-0.slice/session-3.scope\n"
        f"pid 41\n{capture('podman-rootful-v1-cgroupfs.txt')}"
        f"pid 42\n{capture('host-v1.txt')}"
        "pid 43\n"  # the process ended between ps and the read: no lines
    )
    own, by_pid = containers.parse_cgroups(section)
    assert own is None
    assert by_pid[41].runtime == "podman" and by_pid[42] is None and by_pid[43] is None


# `podman inspect --type container --format "podman {{.Id}} {{.Name}} {{json .Config.Labels}}"`
# as Podman 4.3.1 printed it (see podman-rootful-v1-cgroupfs.txt); Docker prints the name
# with a leading "/" (its API's .Name), and "null" for a container without labels.
PODMAN_LINE = (
    "podman ccab8193cec2f62d40be6f6104fe0283f46cad491055817c797d7c87ea56bb28 train-3 "
    '{"gpuhive.owner":"alice","org.example.note":"a \\"quoted\\" value"}'
)
DOCKER_ID = "b508e2673897c4f521d858f56dab18e31ddbfc1f83300fb9793c8a4052af8f05"


def test_it_reads_the_inspect_lines_and_skips_what_does_not_read():
    text = "\n".join(
        [
            PODMAN_LINE,
            "",
            f"docker {DOCKER_ID} /eval-7 null",
            "WARNING: Error loading config file: /root/.docker/config.json",
            f"docker {'0' * 64} /broken {{not json",
            f"docker {'1' * 64} /list [1, 2]",
        ]
    )
    found = containers.parse_inspect(text)
    assert set(found) == {PODMAN_LINE.split()[1], DOCKER_ID}
    assert found[PODMAN_LINE.split()[1]] == Inspected(
        "train-3", {"gpuhive.owner": "alice", "org.example.note": 'a "quoted" value'}
    )
    assert found[DOCKER_ID] == Inspected("eval-7", {})


def test_it_reads_passwd_lines():
    text = "alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\ngarbage\nbob:x:1001:1001::/:/bin/sh"
    assert containers.parse_passwd(text) == {1000: "alice", 1001: "bob"}


ROOTFUL = Container("docker", DOCKER_ID)
ROOTLESS = Container(
    "podman", "5e22f237b52c26e8845f98ae4e6bf8cdb8fe220ff9d2a904be308d311b4a043a", 1000
)


def facts(labels=None, passwd=None, probe_container=None) -> Facts:
    inspected = {} if labels is None else {DOCKER_ID: Inspected("train-3", labels)}
    return Facts(
        cgroups={7: ROOTFUL, 8: ROOTLESS, 9: None},
        probe_container=probe_container,
        inspected=inspected,
        passwd=passwd or {},
        label_key="gpuhive.owner",
        first_personal_uid=1000,
    )


@pytest.mark.parametrize(
    "labels, uid, user, owner",
    [
        ({"gpuhive.owner": "alice"}, 0, "root", "alice"),  # the label, not root
        ({"gpuhive.owner": "alice"}, 1001, "bob", "alice"),  # the image's uid is a stranger's
        ({"gpuhive.owner": "root"}, 0, "root", None),  # root is nobody's
        ({"gpuhive.owner": "Alice Smith"}, 0, "root", None),  # not a UNIX name
        ({"gpuhive.owner": "Alice Smith"}, 1001, "bob", "bob"),
        ({}, 0, "root", None),
        ({}, 1001, "bob", "bob"),  # docker run --user $(id -u)
        ({}, 33, "www-data", None),  # a system account
        ({}, 65534, "nobody", None),
        ({}, 1001, "1001", None),  # a uid without a name
        (None, 0, "root", None),  # not inspected: no docker here, or it is down
    ],
)
def test_a_rootful_containers_owner(labels, uid, user, owner):
    assert containers.attribute(7, uid, user, facts(labels)) == (
        owner,
        {
            "id": "b508e2673897",
            "name": "train-3" if labels is not None else "",
            "runtime": "docker",
        },
    )


def test_a_rootless_containers_owner_is_the_uid_whose_manager_holds_it():
    passwd = {1000: "alice"}
    labelled = facts({"gpuhive.owner": "mallory"}, passwd)
    assert containers.attribute(8, 101000, "101000", labelled)[0] == "alice"  # a subordinate uid
    # No passwd line (no getent): ps names the container's root, which is the user.
    assert containers.attribute(8, 1000, "alice", facts())[0] == "alice"
    assert containers.attribute(8, 101000, "101000", facts())[0] is None


def test_outside_a_container_the_process_keeps_its_owner():
    assert containers.attribute(9, 0, "root", facts()) == ("root", None)
    assert containers.attribute(None, None, None, facts()) == (None, None)
    # A host that is itself a container: its processes share the probe's.
    assert containers.attribute(7, 0, "root", facts(probe_container=ROOTFUL)) == ("root", None)


@pytest.mark.parametrize(
    "user, container, text",
    [
        ("alice", None, "alice"),
        (None, None, "unknown owner"),
        ("alice", {"id": "b508e2673897", "name": "train-3"}, "alice (container train-3)"),
        (None, {"id": "b508e2673897", "name": "train-3"}, "container train-3 (owner unknown)"),
        ("alice", {"id": "5e22f237b52c", "name": ""}, "alice (container 5e22f237b52c)"),
    ],
)
def test_how_an_owner_is_said(user, container, text):
    assert containers.owner_text({"user": user, "container": container}) == text


# --- The shell's reading agrees with the parser's -------------------------------------------


def run_shell(shell: str, body: str, path: str | None = None) -> str:
    script = hostscripts.load("monitoring", "containers.sh") + body
    env = dict(os.environ, PATH=path or os.environ["PATH"])
    argv = [shutil.which(shell), "-c", script, "containers"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_the_shell_asks_about_the_containers_the_parser_finds(shell, tmp_path):
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    for name, expected in EXPECTED.items():
        file = tmp_path / name
        file.write_text(capture(name))
        out = run_shell(shell, f'cgroup_lines {file}; echo "ids:$c_ids"; echo "uids:$c_uids"')
        *printed, ids, uids = out.splitlines()
        assert "\n".join(printed) + "\n" == capture(name), name  # the file, as it is
        container = Container(*expected) if expected else None
        rootless = container and container.rootless_uid is not None
        assert ids.split(":")[1].split() == ([container.id] if container and not rootless else [])
        assert uids.split(":")[1].split() == ([str(container.rootless_uid)] if rootless else [])


def fake_tool(folder: Path, name: str, answer: str) -> None:
    """A stand-in for docker or podman that records its arguments and prints ``answer``."""
    (folder / f"{name}.answer").write_text(answer)
    script = folder / name
    script.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {folder}/{name}.args\ncat {folder}/{name}.answer\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("shell", SHELLS)
def test_it_inspects_with_each_tool_there_is_and_at_most_32_containers(shell, tmp_path):
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    tools = tmp_path / "bin"
    tools.mkdir()
    fake_tool(tools, "podman", PODMAN_LINE + "\n")
    for name in ("timeout", "getent", "cat"):
        (tools / name).symlink_to(shutil.which(name))
    many = tmp_path / "many"
    many.write_text("".join(f"0::/system.slice/docker-{i:064x}.scope\n" for i in range(40)))
    out = run_shell(shell, f"cgroup_lines {many}; inspect_containers", path=str(tools))
    assert out.splitlines()[-3:] == ["@@containers", PODMAN_LINE, "@@passwd"]
    (args,) = (tools / "podman.args").read_text().splitlines()
    assert args.startswith(
        "inspect --type container --format podman {{.Id}} {{.Name}} {{json .Config.Labels}} "
    )
    assert args.split()[-32:] == [f"{i:064x}" for i in range(32)]  # no docker here: not run
    # No container seen: nothing is run.
    (tools / "podman.args").unlink()
    out = run_shell(shell, f"cgroup_lines {CAPTURES / 'host-v1.txt'}; inspect_containers")
    assert out.splitlines()[-2:] == ["@@containers", "@@passwd"]
    assert not (tools / "podman.args").exists()


# --- A whole probe's output, interpreted -----------------------------------------------------


def probe_output(label_line: str) -> str:
    """A probe's sections around two GPU processes: pid 24554 in the Podman container of
    podman-rootful-v1-cgroupfs.txt (root, as ps saw it), pid 25846 on the host."""
    return (
        "@@gpus 0\n0, GPU-1, 100, 50, 1, 2, 3, 4.5, Tesla T4\n"
        "@@apps 0\nGPU-1, 24554, 2000, sleep\nGPU-1, 25846, 100, sleep\n"
        "@@ps\n24554     0 root /bin/sleep 300\n25846     0 root sleep 300\n"
        f"@@cgroups\nprobe\n{capture('host-v1.txt')}"
        f"pid 24554\n{capture('podman-rootful-v1-cgroupfs.txt')}"
        f"pid 25846\n{capture('host-v1.txt')}"
        f"@@containers\n\n{label_line}\n@@passwd\n"
        "@@meminfo\nMemTotal: 2048 kB\nMemAvailable: 1024 kB\n@@disks\n"
    )


def test_a_probe_reads_the_owner_from_the_label_the_lab_chose(settings):
    line = (
        "podman ccab8193cec2f62d40be6f6104fe0283f46cad491055817c797d7c87ea56bb28 train-3 "
        '{"gpuhive.owner":"alice","lab.example/user":"bob"}'
    )
    result = _interpret("n", _sections(probe_output(line)), 10)
    shown = {"id": "ccab8193cec2", "name": "train-3", "runtime": "podman"}
    assert [(p.pid, p.user, p.container) for p in result.processes] == [
        (24554, "alice", shown),
        (25846, "root", None),  # outside any container, ps's owner as before
    ]
    settings.CONTAINER_OWNER_LABEL = "lab.example/user"
    result = _interpret("n", _sections(probe_output(line)), 10)
    assert result.processes[0].user == "bob"
    settings.CONTAINER_OWNER_LABEL = "absent.label"
    assert _interpret("n", _sections(probe_output(line)), 10).processes[0].user is None


@pytest.mark.parametrize("shell", SHELLS)
def test_a_hung_engine_is_killed_after_three_seconds(shell, tmp_path):
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "docker").write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 60\n")
    (tools / "docker").chmod(0o755)
    (tools / "timeout").symlink_to(shutil.which("timeout"))
    started = time.monotonic()
    out = run_shell(
        shell,
        f"cgroup_lines {CAPTURES / 'docker-v2-systemd.txt'}; inspect_containers",
        path=str(tools),
    )
    assert time.monotonic() - started < 10
    assert out.splitlines()[-2:] == ["@@containers", "@@passwd"]
