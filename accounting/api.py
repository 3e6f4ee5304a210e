"""Usage API: the same report as the page, as JSON."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.response import Response

from . import query, reports
from .models import DailyUsage


class UsageLineSerializer(serializers.Serializer):
    period = serializers.DateField()
    name = serializers.CharField()
    reserved_hours = serializers.FloatField()
    unbooked_hours = serializers.FloatField(
        help_text="Held by your tasks outside any booking (never counted as idle)."
    )
    used_hours = serializers.FloatField()
    idle_hours = serializers.FloatField()
    energy_kwh = serializers.FloatField()
    co2e_kg = serializers.FloatField()


PARAMETERS = [
    OpenApiParameter("by", str, enum=list(reports.GROUPINGS), description="Default: user."),
    OpenApiParameter("period", str, enum=list(reports.PERIODS), description="Default: day."),
    OpenApiParameter("start", str, description="First day, YYYY-MM-DD (default: end − 29)."),
    OpenApiParameter("end", str, description="Last day, YYYY-MM-DD (default: today)."),
]


class UsageViewSet(viewsets.GenericViewSet):
    """GPU-hours reserved, held by tasks without a booking (unbooked), used and idle (booked
    but under the idle load; never more than reserved), energy and CO2e: your own (staff:
    everyone's)."""

    queryset = DailyUsage.objects.none()
    serializer_class = UsageLineSerializer
    pagination_class = None

    @extend_schema(parameters=PARAMETERS, responses=UsageLineSerializer(many=True))
    def list(self, request):
        lines = reports.report(request.user, **query.choice(request.query_params))
        return Response([line.as_dict() for line in lines])
