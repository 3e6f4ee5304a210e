"""Jobs in the operator console: read-only (tasks change by running, not by editing)."""

from django.contrib import admin

from accesscontrol.permissions import RestrictedAdminMixin

from .models import Job, Task, TaskAction


class TaskInline(admin.TabularInline):
    model = Task
    fields = ["host", "command", "status", "exit_code", "started_at", "ended_at", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Job)
class JobAdmin(RestrictedAdminMixin, admin.ModelAdmin):
    list_display = ["name", "owner", "status", "created"]
    search_fields = ["name", "owner__username"]
    readonly_fields = ["owner", "template", "created"]
    inlines = [TaskInline]


class TaskActionInline(admin.TabularInline):
    """Starts and signals asked for, and how the workers carried them out."""

    model = TaskAction
    fields = ["action", "requested_by", "requested_at", "done_at", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Task)
class TaskAdmin(RestrictedAdminMixin, admin.ModelAdmin):
    list_display = ["pk", "job", "host", "status", "exit_code", "unix_username", "started_at"]
    list_filter = ["status", "host"]
    search_fields = ["job__name", "command", "screen_session"]
    inlines = [TaskActionInline]

    def get_readonly_fields(self, request, obj=None):
        # Admins may schedule a stop; a start runs as the owner, so only the owner sets it.
        editable = {"scheduled_stop"}
        if obj is not None and obj.job.owner_id == request.user.pk:
            editable.add("scheduled_start")
        return [f.name for f in Task._meta.fields if f.name not in editable]

    def has_add_permission(self, request):
        return False
