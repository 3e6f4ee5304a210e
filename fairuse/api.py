"""Idle notices API: read your own (host admins: their hosts'), keep a booking."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accesscontrol.permissions import RestrictedViewSetMixin
from core.ids import IdField
from monitoring.models import Device
from reservations.models import Reservation

from . import services
from .models import IdleNotice


class IdleNoticeSerializer(serializers.ModelSerializer):
    devices = IdField(many=True, queryset=Device.objects.all())
    owner = serializers.CharField(source="reservation.owner.username", read_only=True)

    class Meta:
        model = IdleNotice
        fields = [
            "id",
            "reservation",
            "owner",
            "state",
            "action",
            "devices",
            "created",
            "release_at",
            "closed_at",
            "outcome",
        ]
        read_only_fields = fields


class KeepSerializer(serializers.Serializer):
    reservation = serializers.PrimaryKeyRelatedField(queryset=Reservation.objects.all())


class IdleNoticeViewSet(RestrictedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Warnings about idle bookings and what became of them; `keep/` exempts a booking."""

    queryset = IdleNotice.objects.select_related("reservation__owner").prefetch_related("devices")
    serializer_class = IdleNoticeSerializer

    @extend_schema(request=KeepSerializer, responses=IdleNoticeSerializer)
    @action(detail=False, methods=["post"])
    def keep(self, request):
        """Keep a reservation: its idle GPUs are not given back for the rest of its time."""
        serializer = KeepSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        notice = services.keep(serializer.validated_data["reservation"], request.user)
        return Response(IdleNoticeSerializer(notice).data)
