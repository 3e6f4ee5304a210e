"""Protection's settings, read when used (so tests and the admin's changes apply at once)."""

import fnmatch
from dataclasses import dataclass

from django.conf import settings

OFF, RESERVED, STRICT = "off", "reserved", "strict"
LEVELS = (OFF, RESERVED, STRICT)


def level() -> str:
    """off: nothing; reserved: intruders on reserved GPUs; strict: also unreserved use."""
    value = str(settings.PROTECTION_LEVEL).strip().lower()
    if value not in LEVELS:
        raise ValueError(f"PROTECTION_LEVEL must be one of {', '.join(LEVELS)}, not {value!r}")
    return value


def grace_cycles() -> int:
    """Extra probes a process that may be just ending must be seen in before it is flagged
    (one running when the reservation began, or unreserved use at the strict level)."""
    return max(0, int(settings.PROTECTION_GRACE_CYCLES))


@dataclass(frozen=True)
class AllowRule:
    """A process of ``user`` (``*``: anyone) whose command matches ``pattern`` is never flagged."""

    user: str
    pattern: str

    @classmethod
    def parse(cls, text: str) -> "AllowRule":
        user, sep, pattern = text.partition(":")
        if not sep or not user.strip() or not pattern.strip():
            raise ValueError(f"allow-list entry {text!r} is not USER:PATTERN")
        return cls(user.strip(), pattern.strip())

    def allows(self, user: str | None, command: str) -> bool:
        if self.user != "*" and self.user != user:
            return False
        return fnmatch.fnmatchcase(command or "", self.pattern)


def allow_rules() -> list[AllowRule]:
    users = [AllowRule(u, "*") for u in settings.PROTECTION_ALLOWED_USERS]
    return users + [AllowRule.parse(e) for e in settings.PROTECTION_ALLOWED_COMMANDS]


def is_allowed(user: str | None, command: str, rules: list[AllowRule]) -> bool:
    return any(rule.allows(user, command) for rule in rules)


def handler_entries() -> list[dict]:
    """VIOLATION_HANDLERS as dicts: {"handler": "dotted.path", "options": {...},
    "repeat_seconds": N}; a bare dotted path is a handler without options."""
    entries = settings.VIOLATION_HANDLERS
    if not isinstance(entries, list):
        raise ValueError("VIOLATION_HANDLERS must be a list of {'handler': ..., 'options': ...}")
    entries = [{"handler": e} if isinstance(e, str) else e for e in entries]
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("handler"), str):
            raise ValueError(f"VIOLATION_HANDLERS entry {entry!r} has no 'handler' dotted path")
        if not isinstance(entry.get("options", {}), dict):
            raise ValueError(f"VIOLATION_HANDLERS entry {entry['handler']}: options must be a dict")
        repeat = entry.get("repeat_seconds")
        if repeat is not None and not isinstance(repeat, int | float):
            raise ValueError(
                f"VIOLATION_HANDLERS entry {entry['handler']}: repeat_seconds is a number"
            )
    return entries
