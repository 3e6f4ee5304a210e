"""Background tasks run by the django-q2 cluster. Arguments are IDs, never model instances."""

from .inventory import probe_and_record
from .models import Host


def probe_host_now(host_id: int) -> str:
    """Probe one host at once (the admin's "probe now"); the outcome lands on the host."""
    host = Host.objects.filter(pk=host_id).first()
    if host is None:
        return f"host {host_id} no longer exists"
    result = probe_and_record(host, force=True)
    return result.error or f"{host.name}: {len(result.gpus or [])} GPUs"
