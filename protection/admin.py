"""The operator console for violations: read-only records of what was seen and done."""

from django.contrib import admin

from accesscontrol.permissions import RestrictedAdminMixin

from .models import HandlerRun, Violation


class HandlerRunInline(admin.TabularInline):
    model = HandlerRun
    extra = 0
    fields = ["handler", "status", "outcome", "error", "started_at", "finished_at"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Violation)
class ViolationAdmin(RestrictedAdminMixin, admin.ModelAdmin):
    """Records written by detection; nobody edits them (host admins see their hosts')."""

    list_display = [
        "device",
        "offender_name",
        "pid",
        "reservation_owner",
        "first_seen",
        "last_seen",
        "ended_at",
    ]
    list_filter = ["device__host", ("ended_at", admin.EmptyFieldListFilter)]
    search_fields = [
        "offender_unix",
        "command",
        "container_name",
        "container_id",
        "reservation_owner__username",
    ]
    date_hierarchy = "first_seen"
    list_select_related = ["device__host", "reservation_owner"]
    inlines = [HandlerRunInline]
    fields = [
        "device",
        "offender_unix",
        "offender",
        "pid",
        "command",
        "container_id",
        "container_name",
        "reservation",
        "reservation_owner",
        "first_seen",
        "last_seen",
        "ended_at",
    ]
    readonly_fields = fields

    @admin.display(description="offender")
    def offender_name(self, violation):
        return violation.offender_name

    def has_add_permission(self, request):
        return False
