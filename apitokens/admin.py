from django.contrib import admin, messages

from .models import ApiToken
from .services import revoke_token


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Operators see and revoke tokens; only their owners create them (the secret is theirs)."""

    list_display = ["name", "user", "prefix", "created", "expires", "last_used", "revoked"]
    list_filter = ["revoked"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = [f.name for f in ApiToken._meta.fields]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset.filter(revoked__isnull=True):
            revoke_token(token, request.user)
        messages.success(request, "Revoked.")
