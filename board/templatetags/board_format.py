"""Figures of the GPU board's tiles (board.js formats live updates the same way)."""

from django import template

register = template.Library()


@register.filter
def short_gib(mib) -> str:
    """MiB as GiB: whole from 10 GiB up, else one decimal, so a tile's line stays short."""
    if mib is None or mib == "":
        return "–"
    value = float(mib) / 1024
    return str(round(value)) if float(mib) >= 10240 else f"{value:.1f}"
