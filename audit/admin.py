"""The audit log in the admin: read-only, filterable, for superusers."""

from django.contrib import admin

from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["time", "actor_name", "action", "target"]
    list_filter = ["action"]
    search_fields = ["actor_name", "action", "target"]
    date_hierarchy = "time"
    readonly_fields = ["time", "actor", "actor_name", "action", "target", "detail"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser
