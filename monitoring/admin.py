from django.contrib import admin, messages
from django.db.models import Count, Q
from django.utils.html import format_html

from core import lease

from .models import Device, Host, WorkerCluster

PROBE_NOW_ACTIVITY = "probe-now"


class DeviceInline(admin.TabularInline):
    model = Device
    extra = 0
    can_delete = False
    fields = ["index", "name", "uuid", "memory_total_mib", "status", "first_seen", "last_seen"]
    readonly_fields = fields
    show_change_link = True


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "address",
        "port",
        "username",
        "transport",
        "enabled",
        "status_badge",
        "gpu_count",
        "last_seen",
        "short_error",
    ]
    list_filter = ["status", "enabled", "transport"]
    search_fields = ["name", "address"]
    readonly_fields = [
        "status",
        "last_seen",
        "last_probe_at",
        "last_error",
        "host_key_type",
        "host_key_fingerprint",
        "created",
    ]
    exclude = ["host_key"]
    inlines = [DeviceInline]
    actions = ["probe_now", "forget_host_key"]

    @admin.display(description="status", ordering="status")
    def status_badge(self, host):
        colour = {"up": "green", "unknown": "gray"}.get(host.status, "red")
        return format_html('<b style="color:{}">{}</b>', colour, host.get_status_display())

    def get_queryset(self, request):
        # The GPU column is counted in the list's one query, not one query per host.
        present = Count("devices", filter=Q(devices__status=Device.Status.PRESENT))
        return super().get_queryset(request).annotate(present_gpus=present)

    @admin.display(description="GPUs", ordering="present_gpus")
    def gpu_count(self, host):
        return host.present_gpus

    @admin.display(description="last error")
    def short_error(self, host):
        return host.last_error[:80]

    @admin.action(description="Probe now (in the background)")
    def probe_now(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        task = "monitoring.tasks.probe_host_now"
        queued = sum(lease.enqueue(PROBE_NOW_ACTIVITY, task, pk) for pk in ids)
        if queued < len(ids):
            self.message_user(
                request,
                f"Could not queue the probe for {len(ids) - queued} host(s): the task broker "
                "is unreachable (see Background activities).",
                messages.ERROR,
            )
        if queued:
            self.message_user(request, f"Probe queued for {queued} host(s).", messages.SUCCESS)

    @admin.action(description="Forget the recorded host key (trust the next one)")
    def forget_host_key(self, request, queryset):
        for host in queryset:
            host.forget_host_key()
        self.message_user(request, f"Host key forgotten for {queryset.count()} host(s).")


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    list_display = ["__str__", "name", "uuid", "memory_total_mib", "status", "last_seen"]
    list_filter = ["status", "host", "name"]
    search_fields = ["uuid", "name", "host__name"]
    readonly_fields = ["host", "index", "uuid", "first_seen", "last_seen"]


@admin.register(WorkerCluster)
class WorkerClusterAdmin(admin.ModelAdmin):
    """Supervised worker clusters: their heartbeat, and each restart of a stalled one."""

    list_display = [
        "name",
        "started_at",
        "last_check_at",
        "last_task_at",
        "tasks_done",
        "restarts",
        "last_restart_at",
        "last_restart_reason",
        "stopped_at",
    ]
    readonly_fields = list_display

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
