"""Figures of the GPU board's tiles (board.js formats live updates the same way)."""

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from .hive_time import when

register = template.Library()


@register.filter
def short_gib(mib) -> str:
    """MiB as GiB: whole from 10 GiB up, else one decimal, so a tile's line stays short."""
    if mib is None or mib == "":
        return "–"
    value = float(mib) / 1024
    return str(round(value)) if float(mib) >= 10240 else f"{value:.1f}"


TILE = (
    '<article class="gpu-tile {colour}" id="gpu-{id}" data-model="{model}" data-state="{state}"'
    "{flags}>"
    '<a class="gt-name" href="{url}#gpu-{index}">{host}:{name}</a> '
    '<span class="gt-model">{model}</span>'
    '<div class="gt-bars" aria-hidden="true"><i class="gt-util" style="width:{util}%"></i>'
    '<i class="gt-mem" style="width:{mem}%"></i></div>'
    '<p class="gt-figs">{figures}</p><p class="gt-users">{users}</p>'
    '<p class="gt-state">{state_text}</p></article>'
)


@register.simple_tag
def gpu_tile(g: dict, row) -> str:
    """One tile of the board. A tag rather than template markup: 800 tiles of template
    variables took most of the page's server time; this builds the same HTML escaped."""
    flags = "".join(f' data-{name}="1"' for name in ("mine", "free", "lost", "slice") if g[name])
    if g["lost"]:
        figures = format_html("GPU lost: not seen since {}", when(g["last_seen"]))
    else:
        figures = g["figures"] if row.up else "no data: host down"
    return format_html(
        TILE,
        colour=g["colour"],
        id=g["id"],
        model=g["model"],
        state=g["booking"].state,
        flags=mark_safe(flags),  # noqa: S308 - only our constant attribute names
        url=row.url,
        index=g["index"],
        name=g["name"],
        host=row.host.name,
        util=g["util_width"],
        mem=g["mem_width"],
        figures=figures,
        users=g["users"],
        state_text=g["state_text"],
    )
