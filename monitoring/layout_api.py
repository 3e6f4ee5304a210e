"""The signed-in user's own layout of the host pages' live charts (DashboardLayout), read and
saved by the host page's script (dashboard.js) like any API client would."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.ids import MAX_ID

from .models import DashboardLayout, Host


class LayoutSerializer(serializers.Serializer):
    """Chart keys in the order shown (absent keys are hidden), and host ids to hide."""

    charts = serializers.ListField(
        child=serializers.CharField(),
        help_text=f"Chart keys, each at most once: {', '.join(DashboardLayout.CHARTS)}.",
    )
    hidden_hosts = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        help_text="Ids of hosts not shown.",
    )

    def validate_charts(self, charts: list[str]) -> list[str]:
        unknown = sorted(set(charts) - set(DashboardLayout.CHARTS))
        if unknown:
            known = ", ".join(DashboardLayout.CHARTS)
            raise serializers.ValidationError(
                f"Unknown chart(s): {', '.join(unknown)}. Known: {known}."
            )
        if len(set(charts)) != len(charts):
            raise serializers.ValidationError("Each chart may appear once.")
        return charts

    def validate_hidden_hosts(self, ids: list[int]) -> list[int]:
        known = set(Host.objects.filter(pk__in=ids).values_list("pk", flat=True))
        missing = sorted(set(ids) - known)
        if missing:
            raise serializers.ValidationError(f"No host with id {', '.join(map(str, missing))}.")
        return sorted(set(ids))


class DashboardViewSet(viewsets.ViewSet):
    """Your own dashboard settings: each user reads and writes only theirs."""

    serializer_class = LayoutSerializer

    @extend_schema(methods=["GET"], responses=LayoutSerializer)
    @extend_schema(methods=["PUT"], request=LayoutSerializer, responses=LayoutSerializer)
    @action(detail=False, methods=["get", "put"])
    def layout(self, request):
        """GET: your chart layout (every chart, no host hidden, until you save one). PUT:
        replace it; a refused layout changes nothing."""
        if request.method == "PUT":
            layout = LayoutSerializer(data=request.data)
            layout.is_valid(raise_exception=True)
            DashboardLayout.objects.update_or_create(
                user=request.user, defaults=layout.validated_data
            )
        return Response(DashboardLayout.for_user(request.user))
