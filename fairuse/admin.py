"""Idle policies are set here; notices are records, read-only."""

from django.contrib import admin

from accesscontrol.permissions import RestrictedAdminMixin

from .models import IdleNotice, IdlePolicy


@admin.register(IdlePolicy)
class IdlePolicyAdmin(admin.ModelAdmin):
    list_display = ["__str__", "host", "group", "action", "minutes", "grace_minutes"]
    list_filter = ["action"]
    search_fields = ["host__name", "group__name"]


@admin.register(IdleNotice)
class IdleNoticeAdmin(RestrictedAdminMixin, admin.ModelAdmin):
    list_display = ["reservation", "state", "action", "created", "release_at", "closed_at"]
    list_filter = ["state", "action"]
    search_fields = ["reservation__title", "reservation__owner__username", "outcome"]
    date_hierarchy = "created"
    readonly_fields = [f.name for f in IdleNotice._meta.fields] + ["devices"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
