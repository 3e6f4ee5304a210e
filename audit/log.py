"""record(): the one way to write the audit log."""

import logging

from .models import AuditEvent

log = logging.getLogger("gpuhive.audit")


def record(action: str, *, actor=None, target="", **detail) -> AuditEvent:
    """Log `action` (dotted, e.g. "job.run_as") by `actor` (a user or None for the service)
    on `target` (any object; its str is kept). `detail` must be JSON-serialisable and must
    never hold secrets: the log is readable by every admin."""
    name = getattr(actor, "get_username", lambda: "system")() if actor else "system"
    event = AuditEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_name=name,
        action=action,
        target=str(target)[:255],
        detail=detail,
    )
    log.info("%s %s %s %s", name, action, event.target, detail or "")
    return event
