from django.contrib import admin
from django.http import HttpRequest

from .models import Activity


@admin.register(Activity)
class ActivityAdmin(admin.ModelAdmin):
    """Background activities (probing loop, history cleanup): who runs them and how they fare."""

    list_display = ["name", "holder", "lease_expires", "last_success_at", "last_summary", "error"]
    search_fields = ["name", "last_summary", "last_error"]
    readonly_fields = [
        "name",
        "holder",
        "lease_expires",
        "last_success_at",
        "last_summary",
        "last_error_at",
        "last_error",
    ]

    @admin.display(description="last error")
    def error(self, activity: Activity) -> str:
        if not activity.last_error:
            return ""
        return f"{activity.last_error_at:%Y-%m-%d %H:%M:%S}: {activity.last_error[:80]}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
