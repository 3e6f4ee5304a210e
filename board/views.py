from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from .tiles import board_rows, summary


@login_required
def board(request):
    """The landing page: every GPU as one compact tile, rendered from the last stored probe
    and kept live over the monitoring websocket (board.js)."""
    rows = board_rows(request.user)
    gpus = [g for row in rows for g in row.gpus]
    context = {
        "rows": rows,
        "summary": summary(rows),
        "host_names": [row.host.name for row in rows],
        "models": sorted({g["model"] for g in gpus}),
    }
    return render(request, "board/board.html", context)


