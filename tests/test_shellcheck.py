"""shellcheck finds nothing in the repository's shell: the scripts hosts are sent (the apps'
``scripts/*.sh``, see monitoring.hostscripts), and bin/, deploy/, .ci/, bench/ scripts. Each
file says its shell: a shebang, or a ``# shellcheck shell=`` line; the host-side scripts say
``sh`` (POSIX: dash is /bin/sh on Debian and Ubuntu)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.realparts import require

ROOT = Path(__file__).resolve().parent.parent
# Not ours, or not source: the virtualenv, caches, the service's data.
SKIPPED = {
    ".git",
    ".venv",
    "data",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "test-results",
}
SHEBANG = re.compile(rb"#!\s*/(?:usr/)?bin/(?:env\s+)?(?:ba|da)?sh\b")


def shell_files() -> list[str]:
    """Every *.sh file, and every file whose first line runs a shell (bin/test, .ci/run)."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in SKIPPED]
        for name in files:
            path = Path(folder, name)
            if name.endswith(".sh") or _has_shell_shebang(path):
                found.append(str(path.relative_to(ROOT)))
    return sorted(found)


def _has_shell_shebang(path: Path) -> bool:
    with path.open("rb") as file:
        return bool(SHEBANG.match(file.readline(64)))


def test_shellcheck_finds_nothing_in_any_shell_script():
    require(shutil.which("shellcheck"), "shellcheck is not installed (apt-get install shellcheck)")
    files = shell_files()
    # What it checks includes each kind: so the search cannot quietly come back empty.
    for expected in (
        "bin/test",
        "bin/_venv.sh",
        ".ci/run",
        "deploy/backup.sh",
        "jobs/scripts/spawn.sh",
        "monitoring/scripts/sample.sh",
    ):
        assert expected in files
    # -x: a script's `. ./part.sh` (and bin/'s `source bin/_venv.sh`) is read as part of it;
    # .shellcheckrc says where to look.
    done = subprocess.run(
        ["shellcheck", "-x", "--format=gcc", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
