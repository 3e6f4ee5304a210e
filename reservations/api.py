"""Reservations API: everyone signed in sees the calendar; only owners and admins change it."""

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.response import Response

from hiveproject.ids import IdField
from hiveproject.pagination import paged_rows
from hiveproject.rows import ValuesRows
from monitoring.models import Device

from . import services
from .filters import filter_reservations
from .models import Reservation


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


# The list's rows, written from values() by ReservationSerializer's fields (hiveproject.rows).
reservation_rows = ValuesRows(ReservationSerializer)
