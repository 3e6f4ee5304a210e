from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError

from accesscontrol.permissions import RestrictedAdminMixin
from hiveproject.api_errors import Conflict

from . import services
from .models import CalendarChoice, Reservation, ReservedDevice, SentNotification


class ReservedDeviceInline(admin.TabularInline):
    model = ReservedDevice
    extra = 0
    fields = ["device", "start", "end", "holds"]
    readonly_fields = fields
    can_delete = False


def _decide(modeladmin, request, queryset, decide, done: str):
    """Apply ``decide`` to each selected booking; say per booking what happened."""
    decided = 0
    for reservation in queryset.prefetch_related("devices"):
        try:
            decide(reservation, request.user)
            decided += 1
        except (ValidationError, PermissionDenied, Conflict) as exc:
            text = " ".join(getattr(exc, "messages", [str(exc)]))
            modeladmin.message_user(request, f"{reservation}: {text}", messages.ERROR)
    if decided:
        modeladmin.message_user(request, f"{decided} reservation(s) {done}.", messages.SUCCESS)


@admin.register(Reservation)
class ReservationAdmin(RestrictedAdminMixin, admin.ModelAdmin):
    """Read here; changes go through the API/pages so the booking rules always apply.

    Bookings on hosts with "bookings need approval" wait as pending (holding their GPUs)
    until a superuser or an admin of those hosts approves or rejects them here.
    """

    list_display = ["title", "owner", "start", "end", "status", "used_utilization"]
    list_filter = ["status", "slots__device__host"]
    search_fields = ["title", "owner__username"]
    date_hierarchy = "start"
    inlines = [ReservedDeviceInline]
    readonly_fields = [
        "owner",
        "start",
        "end",
        "status",
        "created",
        "updated",
        "used_utilization",
        "used_memory_mib",
        "idle_minutes",
        "busy_minutes",
        "usage_final",
    ]
    actions = ["approve", "reject"]

    @admin.action(description="Approve the selected pending reservations")
    def approve(self, request, queryset):
        _decide(self, request, queryset, services.approve_reservation, "approved")

    @admin.action(description="Reject the selected pending reservations (frees their GPUs)")
    def reject(self, request, queryset):
        _decide(self, request, queryset, services.reject_reservation, "rejected")

    def has_add_permission(self, request):
        return False  # bookings are made in the calendar or the API, under the rules


@admin.register(SentNotification)
class SentNotificationAdmin(admin.ModelAdmin):
    list_display = ["reservation", "kind", "device_key", "sent"]
    list_filter = ["kind"]
    readonly_fields = ["reservation", "kind", "device_key", "sent"]


@admin.register(CalendarChoice)
class CalendarChoiceAdmin(admin.ModelAdmin):
    list_display = ["user"]
