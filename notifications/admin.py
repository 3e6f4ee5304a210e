"""Deliveries in the admin (read-only): what was told to whom, what failed, and the backlog
the sender has yet to send; failed ones can be tried again once the cause is fixed."""

from django.contrib import admin

from . import send
from .models import Delivery


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["event", "channel", "state", "attempts", "last_error", "created", "sent_at"]
    list_filter = ["state", "event", "channel__kind"]
    # Not the channel's target: a webhook's address is a secret of its owner.
    search_fields = ["subject", "key", "channel__user__username", "last_error"]
    date_hierarchy = "created"
    list_select_related = ["channel__user"]
    fields = ["channel", "event", "key", "subject", "text", "state", "attempts", "last_error",
              "created", "sent_at"]  # fmt: skip
    readonly_fields = fields
    actions = ["try_again"]

    def changelist_view(self, request, extra_context=None):
        """The backlog above the list: what waits, and for how long the oldest has."""
        extra_context = {**(extra_context or {}), "backlog": send.backlog()}
        return super().changelist_view(request, extra_context)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Try the selected deliveries again now (given up ones too)")
    def try_again(self, request, queryset):
        count = send.try_again(queryset)
        self.message_user(request, f"{count} delivery(ies) will be sent by the next retry round.")
