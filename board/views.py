from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import render

from .states import booking_states, state_text
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


@login_required
def states(request):
    """Booking states of every GPU, for the board to refresh without reloading:
    {"gpus": {device id: {"state", "text", "mine"}}} (free GPUs are left out)."""
    payload = {
        str(pk): {
            "state": booking.state,
            "text": state_text(booking),
            "mine": booking.owner_id == request.user.pk,
        }
        for pk, booking in booking_states(request.user).items()
    }
    return JsonResponse({"gpus": payload})
