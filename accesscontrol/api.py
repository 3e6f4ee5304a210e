"""API: grants with their windows (operators write, users read their own), and "my access".

Users see only grants that apply to them, and in them only themselves and their own groups:
who else may use what is the operators' business (TensorHive shows everyone's).
"""

from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import DjangoModelPermissions, IsAuthenticated
from rest_framework.response import Response

from core.api_errors import Conflict
from core.ids import IdField
from core.zones import site_zone
from monitoring.models import Device

from .coverage import active_ban, coverage_map
from .models import Grant, Profile, Window
from .permissions import RestrictedViewSetMixin, may_inspect_others, permission_name, restrict

MAX_RANGE = timedelta(days=366)
EARLIEST, LATEST = 1970, 2999


class WindowSerializer(serializers.ModelSerializer):
    weekdays = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=6),
        min_length=1,
        max_length=7,
        help_text="0 = Monday ... 6 = Sunday.",
    )

    class Meta:
        model = Window
        fields = ["weekdays", "start", "end"]

    def validate_weekdays(self, value):
        if len(set(value)) != len(value):
            raise serializers.ValidationError("Each weekday may appear only once.")
        return "".join(str(d) for d in sorted(value))


class GrantSerializer(serializers.ModelSerializer):
    serializer_related_field = IdField  # users, groups, hosts and devices by whole-number id
    windows = WindowSerializer(many=True, required=False)

    class Meta:
        model = Grant
        fields = [
            "id",
            "name",
            "note",
            "users",
            "groups",
            "scope",
            "hosts",
            "devices",
            "valid_from",
            "valid_until",
            "windows",
            "created",
            "updated",
        ]

    def _value(self, attrs, name):
        """A field as it will be after this write (partial updates keep the rest)."""
        if name in attrs:
            return attrs[name]
        if self.instance is None:
            return None
        field = getattr(self.instance, name)
        return list(field.all()) if hasattr(field, "all") else field

    def validate(self, attrs):
        scope, until = self._value(attrs, "scope"), self._value(attrs, "valid_until")
        errors = {}
        if scope == Grant.Scope.HOSTS and not self._value(attrs, "hosts"):
            errors["hosts"] = "Choose at least one host for a host-scoped grant."
        if scope == Grant.Scope.DEVICES and not self._value(attrs, "devices"):
            errors["devices"] = "Choose at least one GPU for a GPU-scoped grant."
        if not self._value(attrs, "users") and not self._value(attrs, "groups"):
            errors["users"] = "Name at least one user or group."
        first = self._value(attrs, "valid_from")
        if until and first and until < first:
            errors["valid_until"] = "The last day cannot be before the first day."
        if errors:
            raise serializers.ValidationError(errors)
        return attrs

    @transaction.atomic
    def create(self, validated_data):
        windows = validated_data.pop("windows", [])
        grant = super().create(validated_data)
        for window in windows:
            Window.objects.create(grant=grant, **window)
        return grant

    @transaction.atomic
    def update(self, instance, validated_data):
        # The row stays locked to the end; a change since the request read it is refused
        # rather than overwritten with this older copy.
        stored = Grant.objects.select_for_update().only("updated").get(pk=instance.pk)
        if stored.updated != instance.updated:
            raise Conflict(f"The grant '{instance}' was changed meanwhile; reload it and retry.")
        windows = validated_data.pop("windows", None)
        grant = super().update(instance, validated_data)
        if windows is not None:  # the given list replaces the windows
            grant.windows.all().delete()
            for window in windows:
                Window.objects.create(grant=grant, **window)
        return grant

    def to_representation(self, grant):
        data = super().to_representation(grant)
        user = self.context["request"].user
        if not user.has_perm(permission_name(Grant, "view")):
            own_groups = set(user.groups.values_list("pk", flat=True))
            data["users"] = [pk for pk in data["users"] if pk == user.pk]
            data["groups"] = [pk for pk in data["groups"] if pk in own_groups]
        return data


class ModelPermissions(DjangoModelPermissions):
    """Django's model permissions for writes, read from the view's model alone.

    DRF's class calls ``get_queryset()`` only to learn the model, which here would build the
    restricted queryset (guardian's object permissions and the grant rules) a second time per
    request; what the user may see is still decided by ``restrict`` in ``get_queryset``.
    """

    def _queryset(self, view):
        return view.queryset


class GrantViewSet(RestrictedViewSetMixin, viewsets.ModelViewSet):
    """Grants: operators read and write all; others read the grants that apply to them."""

    queryset = Grant.objects.prefetch_related("users", "groups", "hosts", "devices", "windows")
    serializer_class = GrantSerializer
    permission_classes = [IsAuthenticated, ModelPermissions]

    def perform_create(self, serializer):
        serializer.save(created_by=self.request.user)


def parse_instant(name: str, raw: str | None) -> datetime:
    """An ISO 8601 date-time with an offset, or a ValidationError that says what is wrong."""
    if not raw:
        raise serializers.ValidationError({name: "Required, e.g. 2025-03-03T08:00:00+01:00."})
    try:
        value = parse_datetime(raw)
    except ValueError:
        value = None
    if value is None:
        raise serializers.ValidationError(
            {name: f"{raw!r} is not an ISO 8601 date-time (in a URL write '+' as %2B)."}
        )
    if value.utcoffset() is None:
        raise serializers.ValidationError({name: "Give a UTC offset, e.g. +01:00 or Z."})
    if not EARLIEST <= value.year <= LATEST:
        raise serializers.ValidationError({name: f"Use a year from {EARLIEST} to {LATEST}."})
    return value


class AccessQuery(serializers.Serializer):
    """The query string of ``GET /api/access/``."""

    start = serializers.CharField(required=False)
    end = serializers.CharField(required=False)
    device = serializers.CharField(required=False)
    user = IdField(queryset=get_user_model().objects.all(), required=False)
    group = IdField(queryset=Group.objects.all(), required=False)

    def validate(self, attrs):
        attrs["start"] = parse_instant("start", attrs.get("start"))
        attrs["end"] = parse_instant("end", attrs.get("end"))
        if attrs["end"] <= attrs["start"]:
            raise serializers.ValidationError({"end": "The end must be after the start."})
        if attrs["end"] - attrs["start"] > MAX_RANGE:
            raise serializers.ValidationError({"end": "Ask for at most 366 days at a time."})
        if attrs.get("user") and attrs.get("group"):
            raise serializers.ValidationError({"group": "Give a user or a group, not both."})
        return attrs

    def validate_device(self, text: str) -> list[Device]:
        """GPU ids, comma-separated, as a list of ids is checked everywhere (IdList)."""
        return IdField(many=True, queryset=Device.objects.all()).to_internal_value(text.split(","))


class IntervalSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class AccessDeviceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    host = serializers.CharField()
    covered = IntervalSerializer(many=True, help_text="When it may be used, in the site zone.")


class BanSerializer(serializers.Serializer):
    reason = serializers.CharField()
    until = serializers.DateTimeField(allow_null=True)


class AccessAnswerSerializer(serializers.Serializer):
    """The answer of ``GET /api/access/`` (for the schema; the view builds a dict)."""

    user = serializers.CharField(allow_null=True)
    group = serializers.CharField(allow_null=True)
    time_zone = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    ban = BanSerializer(allow_null=True)
    devices = AccessDeviceSerializer(many=True)


ACCESS_PARAMETERS = [
    OpenApiParameter("start", OpenApiTypes.DATETIME, required=True, description="With offset."),
    OpenApiParameter("end", OpenApiTypes.DATETIME, required=True, description="Within 366 days."),
    OpenApiParameter("device", str, description="Only these GPUs: ids, comma-separated (`3,4`)."),
    OpenApiParameter("user", int, description="Ask about this user (admins, host admins)."),
    OpenApiParameter("group", int, description="Ask about this group (admins, host admins)."),
]


def _interval(start: datetime, end: datetime, zone) -> dict:
    return {"start": start.astimezone(zone).isoformat(), "end": end.astimezone(zone).isoformat()}


class AccessViewSet(viewsets.GenericViewSet):
    """GET /api/access/?start=...&end=[&device=id,...][&user=id|&group=id]: covered intervals.

    Without ``user``/``group`` it answers for the caller; operators and host admins may ask
    about others (host admins see only their hosts' GPUs then).
    """

    # The router names routes after the queryset's model; Profile keeps "access" unique.
    queryset = Profile.objects.none()
    serializer_class = AccessAnswerSerializer
    answers_one_object = True  # GET /api/access/ is one summary, not a list (for the schema)

    @extend_schema(parameters=ACCESS_PARAMETERS)
    def list(self, request):
        query = AccessQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        principal = params.get("group") or params.get("user") or request.user
        inspecting_other = principal != request.user
        if inspecting_other and not may_inspect_others(request.user):
            raise PermissionDenied("Only admins and host admins may ask about other users.")
        devices = self._devices(params.get("device"), inspecting_other)
        coverage = coverage_map(principal, params["start"], params["end"], devices)
        return Response(self._answer(principal, params, coverage))

    def _devices(self, chosen, inspecting_other):
        devices = Device.objects.select_related("host")
        if chosen:
            devices = devices.filter(pk__in=[device.pk for device in chosen])
        else:
            devices = devices.filter(status="present")
        if inspecting_other and not self.request.user.has_perm(permission_name(Grant, "view")):
            devices = restrict(devices, self.request.user, "change")
        return list(devices)

    def _answer(self, principal, params, coverage) -> dict:
        zone = site_zone()
        ban = None if isinstance(principal, Group) else active_ban(principal)
        return {
            "user": None if isinstance(principal, Group) else principal.get_username(),
            "group": principal.name if isinstance(principal, Group) else None,
            "time_zone": zone.key,
            **_interval(params["start"], params["end"], zone),
            "ban": {"reason": ban.reason, "until": ban.until} if ban else None,
            "devices": [
                {
                    "id": device.pk,
                    "name": str(device),
                    "host": device.host.name,
                    "covered": [_interval(s, e, zone) for s, e in covered],
                }
                for device, covered in coverage.items()
            ],
        }
