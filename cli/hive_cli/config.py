"""Where the client keeps the server's URL and its token: a small TOML file only you can read."""

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Config:
    url: str = ""
    token: str = ""
    username: str = ""


def config_path() -> Path:
    """$HIVE_CONFIG, else $XDG_CONFIG_HOME/gpuhive/config.toml (~/.config by default)."""
    if os.environ.get("HIVE_CONFIG"):
        return Path(os.environ["HIVE_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "gpuhive" / "config.toml"


def load() -> Config:
    """The stored settings, with HIVE_URL / HIVE_TOKEN from the environment winning."""
    path = config_path()
    stored = tomllib.loads(path.read_text()) if path.is_file() else {}
    return Config(
        url=os.environ.get("HIVE_URL") or stored.get("url", ""),
        token=os.environ.get("HIVE_TOKEN") or stored.get("token", ""),
        username=stored.get("username", "") if not os.environ.get("HIVE_TOKEN") else "",
    )


def save(config: Config) -> Path:
    """Write the file with mode 0600 (in a 0700 folder): the token is as good as a password."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # JSON strings are valid TOML basic strings (same escapes), so no TOML writer is needed.
    text = "".join(
        f"{key} = {json.dumps(value)}\n"
        for key, value in (
            ("url", config.url),
            ("token", config.token),
            ("username", config.username),
        )
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)  # an older file may have had looser rights
    return path
