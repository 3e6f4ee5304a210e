"""Number formats shared by the monitoring pages."""

from django import template

register = template.Library()


@register.filter
def gib(mib) -> str:
    """MiB as GiB with one decimal ("–" when unknown)."""
    if mib is None or mib == "":
        return "–"
    return f"{float(mib) / 1024:.1f}"
