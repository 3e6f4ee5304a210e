"""The apps' layers: the import-linter contracts hold, every app of ours is in them, and the
list in docs/development.md (Layers) is the contract's, so the page cannot drift from the code.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LINT = "import sys, importlinter.cli as c; sys.exit(c.lint_imports(no_cache=True, no_logo=True))"


def contract(contract_id: str) -> dict:
    return next(c for c in CONFIG["contracts"] if c["id"] == contract_id)


def contract_layers() -> list[list[str]]:
    """From the top; each layer's apps as the contract lists them ('a | b': independent)."""
    return [[name.strip() for name in layer.split("|")] for layer in contract("layers")["layers"]]


def documented_layers(text: str) -> list[list[str]]:
    """The numbered list of docs/development.md's Layers section: the names in backquotes
    before each line's colon."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    lines = re.findall(r"^\d+\. (.*)$", section, re.MULTILINE)
    return [re.findall(r"`(\w+)`", line.split(":", 1)[0]) for line in lines]


def our_packages() -> set[str]:
    """Every package of the service: its Django apps, the wiring and the allocation layer
    (a package without models); the tests and benchmarks stand outside the layers."""
    return {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests", "bench"}


def test_the_docs_list_the_contracts_layers():
    assert documented_layers((ROOT / "docs" / "development.md").read_text()) == contract_layers()


def test_every_app_is_in_one_layer_and_below_nothing_it_imports():
    layered = [name for layer in contract_layers() for name in layer]
    assert sorted(layered) == sorted(our_packages()), "an app in no layer escapes the check"
    assert set(CONFIG["root_packages"]) == our_packages()
    assert contract_layers()[-1] == ["core"]
    assert set(contract("core")["forbidden_modules"]) == our_packages() - {"core"}


def test_the_docs_reader_finds_a_changed_order():
    """The check reads the page as written: a swapped pair of layers differs."""
    text = (ROOT / "docs" / "development.md").read_text()
    swapped = text.replace("6. `reservations`", "6. `apitokens`", 1)
    assert documented_layers(swapped) != contract_layers()


def test_the_contracts_hold():
    """lint-imports, as bin/test runs it; its report says which import broke which layer."""
    done = subprocess.run(
        [sys.executable, "-c", LINT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
