"""Deliveries in the admin (read-only): what was told to whom, and what failed."""

from django.contrib import admin

from .models import Delivery


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["event", "channel", "state", "attempts", "created", "sent_at"]
    list_filter = ["state", "event"]
    fields = ["channel", "event", "key", "subject", "text", "state", "attempts", "last_error",
              "created", "sent_at"]  # fmt: skip
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
