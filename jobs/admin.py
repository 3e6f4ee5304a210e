"""Jobs in the operator console: read-only (tasks change by running, not by editing); the
selected jobs' or tasks' running tasks can be stopped, handed to the workers as on the
pages (jobs.actions)."""

from django.contrib import admin, messages

from accesscontrol.permissions import RestrictedAdminMixin

from . import actions
from .models import Job, Task, TaskAction


def stop(modeladmin, request, tasks) -> None:
    """Stop the running ones of ``tasks`` (TERM, then KILL), each refusal said per task."""
    tasks = list(tasks.select_related("host", "job__owner"))
    results = actions.request_all(tasks, request.user, "stop")
    for task, error in results:
        if error:
            modeladmin.message_user(request, f"Task {task.pk}: {error}", messages.ERROR)
    stopping = sum(not error for _, error in results)
    modeladmin.message_user(
        request, f"Stop asked for {stopping} running task(s); the workers carry it out."
    )


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
    # A job's status is its tasks': "has a failed task", "has a running task" and so on.
    list_filter = ["tasks__status", "created", ("owner", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "description", "template", "owner__username"]
    date_hierarchy = "created"
    list_select_related = ["owner"]
    readonly_fields = ["owner", "template", "created"]
    inlines = [TaskInline]
    actions = ["stop_tasks"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("tasks")  # the status column

    @admin.action(description="Stop the selected jobs' running tasks (TERM, then KILL)")
    def stop_tasks(self, request, queryset):
        stop(self, request, Task.objects.filter(job__in=queryset))


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
    list_filter = ["status", "host", "started_at"]
    search_fields = ["job__name", "job__owner__username", "command", "screen_session", "host__name"]
    date_hierarchy = "started_at"
    list_select_related = ["job", "host"]
    inlines = [TaskActionInline]
    actions = ["stop_tasks"]

    @admin.action(description="Stop the selected tasks (TERM, then KILL)")
    def stop_tasks(self, request, queryset):
        stop(self, request, queryset)

    def get_readonly_fields(self, request, obj=None):
        # Admins may schedule a stop; a start runs as the owner, so only the owner sets it.
        editable = {"scheduled_stop"}
        if obj is not None and obj.job.owner_id == request.user.pk:
            editable.add("scheduled_start")
        return [f.name for f in Task._meta.fields if f.name not in editable]

    def has_add_permission(self, request):
        return False
