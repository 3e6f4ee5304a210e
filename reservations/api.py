"""Reservations API: everyone signed in sees the calendar; only owners and admins change it."""

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import prefetch_related_objects
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.response import Response

from core.ids import IdField
from core.pagination import paged_rows
from core.rows import ValuesRows
from monitoring.models import Device

from . import services
from .filters import filter_reservations
from .models import Reservation
from .usage import usage_of


class ReservationSerializer(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    devices = IdField(many=True, queryset=Device.objects.select_related("host"))

    class Meta:
        model = Reservation
        fields = [
            "id",
            "title",
            "description",
            "devices",
            "start",
            "end",
            "owner",
            "status",
            "note",
        ]
        read_only_fields = ["status", "note"]


class UsageSerializer(serializers.Serializer):
    """How the reservation's GPUs were used, from the monitoring history (reservations.usage)."""

    utilization = serializers.FloatField(allow_null=True, help_text="Average GPU %.")
    memory_mib = serializers.FloatField(allow_null=True, help_text="Average memory used, MiB.")
    idle_minutes = serializers.FloatField(help_text="GPU-minutes below the idle threshold.")
    busy_minutes = serializers.FloatField(help_text="GPU-minutes at or above it.")
    final = serializers.BooleanField(help_text="Stored once it ended; false: so far.")


class ReservationDetailSerializer(ReservationSerializer):
    """One reservation as the calendar's details show it: the fields of the list, and what
    they mean to the reader."""

    status_display = serializers.CharField(source="get_status_display", read_only=True)
    device_names = serializers.SerializerMethodField(
        help_text='Each GPU as "host:index", in the order of `devices`.'
    )
    may_change = serializers.SerializerMethodField(
        help_text="Whether you may edit or cancel it now (its owner or an admin, before its end)."
    )
    usage = serializers.SerializerMethodField(help_text="null until it has begun.")

    class Meta(ReservationSerializer.Meta):
        fields = [
            *ReservationSerializer.Meta.fields,
            "status_display",
            "device_names",
            "may_change",
            "usage",
        ]

    def get_device_names(self, reservation) -> list[str]:
        return [str(device) for device in reservation.devices.all()]

    def get_may_change(self, reservation) -> bool:
        try:  # the rule the edit and the cancel apply
            services.check_can_change(reservation, self.context["request"].user)
        except (PermissionDenied, DjangoValidationError):
            return False
        return True

    @extend_schema_field(UsageSerializer(allow_null=True))
    def get_usage(self, reservation) -> dict | None:
        usage = usage_of(reservation)
        return None if usage is None else UsageSerializer(usage).data


def as_api_error(exc: DjangoValidationError) -> exceptions.ValidationError:
    """Field errors plus one human `detail`, the shape every API error has."""
    if hasattr(exc, "message_dict"):
        errors = dict(exc.message_dict)
        errors["detail"] = " ".join(m for msgs in exc.message_dict.values() for m in msgs)
    else:
        errors = {"detail": " ".join(exc.messages)}
    return exceptions.ValidationError(errors)


LIST_FILTERS = [
    OpenApiParameter("device", str, description="GPU ids, comma-separated, e.g. `3,4`."),
    OpenApiParameter("host", str, description="Host name, or host id."),
    OpenApiParameter("user", str, description="Owner's user name."),
    OpenApiParameter(
        "start", str, description="ISO 8601; only bookings ending after it (site time if naive)."
    ),
    OpenApiParameter(
        "end", str, description="ISO 8601; only bookings starting before it (site time if naive)."
    ),
    OpenApiParameter("status", str, enum=list(Reservation.Status.values)),
]


@extend_schema_view(list=extend_schema(parameters=LIST_FILTERS))
class ReservationViewSet(viewsets.ModelViewSet):
    """Reservations; the list takes ?device=1,2 &host=name|id &user=name &start=&end=
    (ISO 8601; bookings overlapping that range) &status=pending|confirmed|cancelled."""

    queryset = Reservation.objects.select_related("owner").prefetch_related("devices")
    serializer_class = ReservationSerializer

    def list(self, request, *args, **kwargs):
        return paged_rows(self, self.filter_queryset(self.get_queryset()), reservation_rows)

    def filter_queryset(self, queryset):
        if self.action != "list":
            return queryset
        try:
            return filter_reservations(queryset, self.request.query_params)
        except DjangoValidationError as exc:
            raise as_api_error(exc) from None

    def perform_create(self, serializer):
        data = serializer.validated_data
        try:
            serializer.instance = services.create_reservation(self.request.user, **data)
        except DjangoValidationError as exc:
            raise as_api_error(exc) from None

    def perform_update(self, serializer):
        try:
            services.update_reservation(
                serializer.instance, self.request.user, **serializer.validated_data
            )
        except DjangoValidationError as exc:
            raise as_api_error(exc) from None
        except PermissionDenied as exc:
            raise exceptions.PermissionDenied(str(exc)) from None

    def destroy(self, request, *args, **kwargs):
        """Cancel (an ongoing reservation is ended now and kept)."""
        try:
            services.cancel_reservation(self.get_object(), request.user)
        except DjangoValidationError as exc:
            raise as_api_error(exc) from None
        except PermissionDenied as exc:
            raise exceptions.PermissionDenied(str(exc)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=ReservationDetailSerializer)
    def retrieve(self, request, *args, **kwargs):
        """One reservation, with its status in words, its GPUs' names, whether you may change
        it, and how its GPUs were used."""
        reservation = self.get_object()
        prefetch_related_objects([reservation], "devices__host")  # for the names
        context = self.get_serializer_context()
        return Response(ReservationDetailSerializer(reservation, context=context).data)


# The list's rows, written from values() by ReservationSerializer's fields (core.rows).
reservation_rows = ValuesRows(ReservationSerializer)
