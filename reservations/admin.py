from django.contrib import admin

from accesscontrol.permissions import RestrictedAdminMixin
from core.admin_actions import apply_each

from . import services
from .models import CalendarChoice, Reservation, ReservedDevice


class ReservedDeviceInline(admin.TabularInline):
    model = ReservedDevice
    extra = 0
    fields = ["device", "start", "end", "holds"]
    readonly_fields = fields
    can_delete = False


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
        bookings = queryset.prefetch_related("devices")
        apply_each(self, request, bookings, services.approve_reservation, "reservation(s) approved")

    @admin.action(description="Reject the selected pending reservations (frees their GPUs)")
    def reject(self, request, queryset):
        bookings = queryset.prefetch_related("devices")
        apply_each(self, request, bookings, services.reject_reservation, "reservation(s) rejected")

    def has_add_permission(self, request):
        return False  # bookings are made in the calendar or the API, under the rules


@admin.register(CalendarChoice)
class CalendarChoiceAdmin(admin.ModelAdmin):
    list_display = ["user"]
    search_fields = ["user__username"]
