"""The operator console: quotas per group, the queue, runs and claims."""

from django.contrib import admin

from accesscontrol.permissions import RestrictedAdminMixin
from core.admin_actions import apply_each

from . import services
from .models import GpuClaim, QueuedJob, QueuedTask, QueueQuota, QueueRun


@admin.register(QueueQuota)
class QueueQuotaAdmin(admin.ModelAdmin):
    list_display = ["group", "max_gpus", "max_priority"]
    search_fields = ["group__name"]


class QueuedTaskInline(admin.TabularInline):
    model = QueuedTask
    extra = 0
    fields = ["template", "kind", "gpu_count", "devices", "host", "gpu_model", "min_memory_mib"]


class QueueRunInline(admin.TabularInline):
    model = QueueRun
    extra = 0
    fields = ["job", "opportunistic", "gpus", "started_at", "ended_at", "outcome"]
    readonly_fields = fields
    can_delete = False


@admin.register(QueuedJob)
class QueuedJobAdmin(RestrictedAdminMixin, admin.ModelAdmin):
    list_display = ["name", "owner", "group", "priority", "opportunistic", "state", "enqueued_at"]
    list_filter = ["state", "opportunistic", "group"]
    search_fields = ["name", "owner__username", "tasks__template"]
    date_hierarchy = "enqueued_at"
    list_select_related = ["owner", "group"]
    readonly_fields = ["reasons", "reasons_at", "stop_reason", "start_failures", "created"]
    inlines = [QueuedTaskInline, QueueRunInline]
    actions = ["cancel"]

    @admin.action(description="Cancel the selected queued jobs (running ones are stopped)")
    def cancel(self, request, queryset):
        apply_each(self, request, queryset, services.cancel, "queued job(s) cancelled")


@admin.register(GpuClaim)
class GpuClaimAdmin(admin.ModelAdmin):
    """GPUs held by queue runs; deleting a claim frees its GPU for the scheduler."""

    list_display = ["device", "run", "created"]
    list_filter = ["device__host"]
    search_fields = ["device__host__name", "run__queued_job__name"]
