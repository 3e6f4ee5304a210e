from django.contrib import admin

from .models import Reservation, ReservedDevice


class ReservedDeviceInline(admin.TabularInline):
    model = ReservedDevice
    extra = 0
    fields = ["device", "start", "end", "holds"]
    readonly_fields = fields
    can_delete = False


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    """Read here; changes go through the API/pages so the booking rules always apply."""

    list_display = ["title", "owner", "start", "end", "status"]
    list_filter = ["status", "slots__device__host"]
    search_fields = ["title", "owner__username"]
    date_hierarchy = "start"
    inlines = [ReservedDeviceInline]
    readonly_fields = ["owner", "start", "end", "status", "created", "updated"]
