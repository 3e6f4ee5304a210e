"""Hosts files: one table (TOML) or section (INI) per host, so a lab is set up in one step.

[node-1]              # TOML            [node-1]          ; INI
address = "10.0.0.11"                   address = 10.0.0.11
port = 22                               port = 22
user = "monitor"                        user = monitor
"""

import configparser
import tomllib
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction

from .models import Host

KNOWN_KEYS = {"address", "port", "user", "transport", "enabled"}


class HostsFileError(ValueError):
    pass


@dataclass
class HostSpec:
    name: str
    address: str
    port: int = 22
    user: str = "root"
    transport: str = Host.Transport.SSH


def read_hosts_file(path: Path) -> list[HostSpec]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise HostsFileError(f"cannot read {path}: {exc.strerror}") from None
    tables = _parse_toml(path, text) if path.suffix == ".toml" else _parse_ini(path, text)
    return [_spec(path, name, table) for name, table in tables.items()]


def _parse_toml(path, text) -> dict:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HostsFileError(f"{path}: not valid TOML: {exc}") from None
    if not all(isinstance(v, dict) for v in data.values()):
        raise HostsFileError(f"{path}: expected one [table] per host")
    return data


def _parse_ini(path, text) -> dict:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        raise HostsFileError(f"{path}: not a valid INI file: {exc.message}") from None
    return {name: dict(parser[name]) for name in parser.sections()}


def _spec(path, name: str, table: dict) -> HostSpec:
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise HostsFileError(f"{path}: [{name}]: unknown key(s) {', '.join(sorted(unknown))}")
    if "address" not in table:
        raise HostsFileError(f"{path}: [{name}]: missing 'address'")
    try:
        port = int(table.get("port", 22))
    except (TypeError, ValueError):
        raise HostsFileError(f"{path}: [{name}]: port must be a number") from None
    return HostSpec(
        name=name,
        address=str(table["address"]),
        port=port,
        user=str(table.get("user", "root")),
        transport=str(table.get("transport", Host.Transport.SSH)),
    )


def validated_host(spec: HostSpec) -> tuple[Host, bool]:
    """The Host for spec (existing one updated, or a new one), validated but not saved."""
    host = Host.objects.filter(name=spec.name).first()
    created = host is None
    host = host or Host(name=spec.name)
    host.address, host.port, host.username = spec.address, spec.port, spec.user
    host.transport = spec.transport
    try:
        host.full_clean()
    except ValidationError as exc:
        problems = "; ".join(
            f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()
        )
        raise HostsFileError(f"host {spec.name!r}: {problems}") from None
    return host, created


@transaction.atomic
def save_hosts(specs: list[HostSpec]) -> tuple[list[str], list[str]]:
    """Validate every host first, then save all: a bad line changes nothing."""
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise HostsFileError(f"host(s) listed twice: {', '.join(duplicates)}")
    checked = [validated_host(spec) for spec in specs]
    for host, _ in checked:
        host.save()
    created = [h.name for h, new in checked if new]
    updated = [h.name for h, new in checked if not new]
    return created, updated
