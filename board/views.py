from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest
from django.shortcuts import render

from .tiles import board_rows, summary

# Tiles while the lab's GPUs fit about one screen of them (five a row, four rows at
# 1440 x 900); past that the dense view, one line per host, is the default.
TILES_FIT_GPUS = 20
LAYOUTS = ("dense", "tiles")


@login_required
def board(request):
    """The landing page: every GPU, rendered from the last stored probe and kept live over
    the monitoring websocket (board.js); as tiles for a small lab, one line per host (a cell
    per GPU) for a large one, or as ?layout= asks."""
    rows = board_rows(request.user)
    gpus = [g for row in rows for g in row.gpus]
    layout = request.GET.get("layout") or ("dense" if len(gpus) > TILES_FIT_GPUS else "tiles")
    if layout not in LAYOUTS:
        return HttpResponseBadRequest(f"layout must be one of: {', '.join(LAYOUTS)}")
    context = {
        "rows": rows,
        "summary": summary(rows),
        "host_names": [row.host.name for row in rows],
        "models": sorted({g["model"] for g in gpus}),
        "layout": layout,
        "other_layout": "tiles" if layout == "dense" else "dense",
    }
    return render(request, "board/board.html", context)
