"""Violations API (read-only): owners, offenders and host admins see the ones concerning them."""

from rest_framework import serializers, viewsets

from accesscontrol.permissions import RestrictedViewSetMixin

from .models import HandlerRun, Violation


class HandlerRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = HandlerRun
        fields = ["handler", "status", "outcome", "error", "started_at", "finished_at"]


class ViolationSerializer(serializers.ModelSerializer):
    host = serializers.CharField(source="device.host.name", read_only=True)
    offender = serializers.CharField(source="offender_name", read_only=True)
    offender_user = serializers.SlugRelatedField(
        source="offender", slug_field="username", read_only=True
    )
    reservation_owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    handler_runs = HandlerRunSerializer(many=True, read_only=True)

    class Meta:
        model = Violation
        fields = [
            "id",
            "host",
            "device",
            "reservation",
            "reservation_owner",
            "offender",
            "offender_user",
            "pid",
            "command",
            "container_id",
            "container_name",
            "first_seen",
            "last_seen",
            "ended_at",
            "handler_runs",
        ]


class ViolationViewSet(RestrictedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """``?open=true`` lists only intrusions still going on."""

    queryset = Violation.objects.select_related(
        "device__host", "reservation_owner", "offender"
    ).prefetch_related("handler_runs")
    serializer_class = ViolationSerializer

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.request.query_params.get("open") in ("1", "true", "yes"):
            queryset = queryset.filter(ended_at=None)
        return queryset
