"""GPU states API: what each GPU is doing for the reader now (board.states), as the board
and the job form's GPU picker refresh it."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.response import Response

from .states import booking_states


class DeviceStateSerializer(serializers.Serializer):
    device = serializers.IntegerField(help_text="The GPU's id.")
    state = serializers.ChoiceField(
        choices=["closed", "mine", "reserved", "pending", "job", "queue"],
        help_text="closed: free, but no grant lets you start on it now; mine: your booking; "
        "reserved, pending (awaiting approval): someone else's booking; job, queue: a job "
        "or a queue run is on it.",
    )
    text = serializers.CharField(help_text='For people: "reserved by ada", "your job 12".')
    until = serializers.DateTimeField(
        allow_null=True, help_text="When the booking it is in ends (null: none)."
    )
    mine = serializers.BooleanField(help_text="Your booking, job or queue run.")
    job = serializers.IntegerField(allow_null=True, help_text="The job on it (null: none).")


class DeviceStateViewSet(viewsets.ViewSet):
    """GET: the GPUs that are not free for you now, each with why: a booking (whose, until
    when), a job or queue run, or no grant for you now. GPUs not listed are free. One answer
    for the whole lab, computed in a few queries (not paged)."""

    serializer_class = DeviceStateSerializer

    @extend_schema(responses=DeviceStateSerializer(many=True))
    def list(self, request):
        states = booking_states(request.user)
        rows = [
            {
                "device": device,
                "state": booking.state,
                "text": booking.text,
                "until": booking.until,
                "mine": booking.owner_id == request.user.pk,
                "job": booking.job_id,
            }
            for device, booking in states.items()
        ]
        return Response(DeviceStateSerializer(rows, many=True).data)
