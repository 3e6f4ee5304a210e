"""The scripts hosts are given (monitoring.hostscripts): a file's text, its parts inlined
and its comments left out, which still parses as the same POSIX shell."""

import shutil
import subprocess
from pathlib import Path

import pytest

from monitoring import hostscripts
from tests.realparts import require

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPTS = sorted(ROOT.glob(f"*/{hostscripts.FOLDER}/*.sh"))


def test_a_script_is_given_its_parts_and_none_of_its_comments(tmp_path, monkeypatch):
    folder = tmp_path / "hostscripts_example" / hostscripts.FOLDER
    folder.mkdir(parents=True)
    (folder.parent / "__init__.py").write_text("")
    (folder / "part.sh").write_text("# shellcheck shell=sh\n# Sets $x.\nx=1\n")
    (folder / "main.sh").write_text(
        "# shellcheck shell=sh\n"
        "# What it does.\n"
        ". ./part.sh\n"
        "\n"
        'if [ -n "$x" ]; then\n'
        "  # Why.\n"
        '  echo "x is $x"  # a comment after code stays\n'
        "fi\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    text = hostscripts.load("hostscripts_example", "main.sh")
    assert text == (
        'x=1\nif [ -n "$x" ]; then\n  echo "x is $x"  # a comment after code stays\nfi\n'
    )
    done = subprocess.run(["sh", "-c", text], capture_output=True, text=True, check=True)
    assert done.stdout == "x is 1\n"


def test_the_apps_have_host_scripts():
    folders = {path.parent.parent.name for path in SCRIPTS}
    assert {"jobs", "monitoring", "accesscontrol"} <= folders


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: f"{path.parent.parent.name}/{path.name}")
@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_what_a_host_is_given_parses_under_each_shell(path, shell):
    """Leaving comments and blank lines out left valid shell (none was inside a string);
    bash, /bin/sh on RHEL and its kin, reads it in its POSIX mode."""
    require(shutil.which(shell), f"{shell} is not installed")
    text = hostscripts.load(path.parent.parent.name, path.name)
    assert not [line for line in text.splitlines() if line.lstrip().startswith("#")]
    argv = [shell, "--posix", "-n"] if shell == "bash" else [shell, "-n"]
    done = subprocess.run([*argv, "-c", text], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
