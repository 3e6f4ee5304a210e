"""Figures of the GPU board's tiles (board.js formats live updates the same way)."""

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from core.templatetags.hive_time import when

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
    ' data-total="{total}"{flags}>'
    '<a class="gt-name" href="{url}#gpu-{index}">{host}:{name}</a> '
    '<span class="gt-model">{model}</span>'
    '<div class="gt-bars" aria-hidden="true"><i class="gt-util" style="width:{util}%"></i>'
    '<i class="gt-mem" style="width:{mem}%"></i></div>'
    '<p class="gt-figs">{figures}</p><p class="gt-users">{users}</p>'
    '<p class="gt-state">{state_text}</p>{intruder}</article>'
)
INTRUDER = '<p class="gt-intruder"><span aria-hidden="true">! </span>intruder: {}</p>'


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
        total=g["memory_total"] or "",
        figures=figures,
        users=g["users"],
        state_text=g["state_text"],
        intruder=format_html(INTRUDER, g["intruder"]) if g["intruder"] else "",
    )


CELL = (
    '<button type="button" class="dc {colour}{marks}" id="gpu-{id}" data-model="{model}" '
    'data-state="{state}" data-index="{index}" data-total="{total}"{flags} '
    'style="--u:{util};--m:{mem}" aria-label="{label}">{name}{glyph}</button>'
)


@register.simple_tag
def gpu_cell(g: dict, row) -> str:
    """One GPU of the dense board: a focusable cell whose colour is its state, whose fill is
    its utilisation (height) and memory (bottom bar), and whose label says it all in words
    (shown on hover and focus, read out, and written in the detail row by board.js).
    Intruders and lost GPUs also carry a glyph and a pattern: colour is not the only sign.
    A MIG slice's cell follows its GPU's, named as on the tiles ("0.2")."""
    flags = "".join(f' data-{name}="1"' for name in ("mine", "free", "lost", "slice") if g[name])
    if g["intruder"]:
        flags += format_html(' data-intruder="{}"', g["intruder"])
    marks = (" dc-intruder" if g["intruder"] else "") + (" dc-lost" if g["lost"] else "")
    glyph = "!" if g["intruder"] else "×" if g["lost"] else ""
    return format_html(
        CELL,
        colour=g["colour"],
        marks=marks,
        id=g["id"],
        model=g["model"],
        state=g["booking"].state,
        index=g["index"],
        name=g["name"],
        total=g["memory_total"] or "",
        flags=mark_safe(flags),  # noqa: S308 - our constant names, the value escaped above
        util=g["util_width"],
        mem=g["mem_width"],
        label=cell_label(g, row),
        glyph=glyph,
    )


def cell_label(g: dict, row) -> str:
    """ "demo-001:3 A100-SXM4-40GB · 74 % · 35/48 GiB · 72 °C · 227 W · ada · reserved by ada
    until Thu 26 Nov 14:00 · INTRUDER: linus", as board.js writes it on live updates."""
    if g["lost"]:
        figures = f"GPU lost: not seen since {when(g['last_seen'])}"
    else:
        figures = g["figures"] if row.up else "no data: host down"
    parts = [f"{row.host.name}:{g['name']} {g['model']}", figures, g["users"], g["state_text"]]
    if g["intruder"]:
        parts.append(f"INTRUDER: {g['intruder']}")
    return " · ".join(parts)
