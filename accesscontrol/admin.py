"""The operator console: grants with their windows, bans, the motd, profiles, host admins.

Nothing here is cached: every access check reads the tables, so a change saved here counts
from the next request on.
"""

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.utils import timezone
from guardian.admin import ReinforcedGuardedModelAdminMixin

from monitoring.admin import DeviceAdmin, HostAdmin
from monitoring.models import Device, Host

from .models import (
    WEEKDAY_NAMES,
    Ban,
    Grant,
    HostAccount,
    Message,
    Profile,
    RunAsAllowance,
    UpgradeNote,
    Window,
)
from .permissions import RestrictedAdminMixin

User = get_user_model()
WEEKDAY_CHOICES = [(str(i), name) for i, name in enumerate(WEEKDAY_NAMES)]


class WindowForm(forms.ModelForm):
    """Weekdays as checkboxes; stored as the digits 0 (Mon) .. 6 (Sun)."""

    weekdays = forms.MultipleChoiceField(
        choices=WEEKDAY_CHOICES, widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = Window
        fields = ["weekdays", "start", "end"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["weekdays"] = list(self.instance.weekdays)

    def clean_weekdays(self):
        return "".join(sorted(self.cleaned_data["weekdays"]))


class WindowInline(admin.TabularInline):
    model = Window
    form = WindowForm
    extra = 1
    verbose_name = "weekly window (site time zone; no windows: all day)"


class GrantForm(forms.ModelForm):
    class Meta:
        model = Grant
        fields = [
            "name",
            "note",
            "users",
            "groups",
            "scope",
            "hosts",
            "devices",
            "valid_from",
            "valid_until",
        ]

    def clean(self):
        data = super().clean()
        scope = data.get("scope")
        if scope == Grant.Scope.HOSTS and not data.get("hosts"):
            self.add_error("hosts", "Choose at least one host for a host-scoped grant.")
        if scope == Grant.Scope.DEVICES and not data.get("devices"):
            self.add_error("devices", "Choose at least one GPU for a GPU-scoped grant.")
        if not data.get("users") and not data.get("groups"):
            self.add_error("users", "Name at least one user or group.")
        return data


@admin.register(Grant)
class GrantAdmin(RestrictedAdminMixin, admin.ModelAdmin):
    form = GrantForm
    list_display = ["name", "who", "where", "valid_from", "valid_until", "when"]
    list_filter = ["scope", "groups"]
    search_fields = ["name", "note", "users__username", "groups__name", "hosts__name"]
    filter_horizontal = ["users", "groups", "hosts", "devices"]
    readonly_fields = ["created_by", "created", "updated"]
    inlines = [WindowInline]
    fieldsets = [
        (None, {"fields": ["name", "note"]}),
        ("Who", {"fields": ["users", "groups"]}),
        ("Where", {"fields": ["scope", "hosts", "devices"]}),
        ("When", {"fields": ["valid_from", "valid_until"]}),
        ("Record", {"fields": ["created_by", "created", "updated"]}),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("users", "groups", "windows")

    @admin.display(description="who")
    def who(self, grant):
        names = [f"@{g.name}" for g in grant.groups.all()] + [u.username for u in grant.users.all()]
        return ", ".join(names) or "nobody"

    @admin.display(description="where", ordering="scope")
    def where(self, grant):
        if grant.scope == Grant.Scope.HOSTS:
            return ", ".join(h.name for h in grant.hosts.all())
        if grant.scope == Grant.Scope.DEVICES:
            return ", ".join(str(d) for d in grant.devices.select_related("host"))
        return "all devices"

    @admin.display(description="when")
    def when(self, grant):
        return "; ".join(str(w) for w in grant.windows.all()) or "all day"

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(Ban)
class BanAdmin(RestrictedAdminMixin, admin.ModelAdmin):
    list_display = ["user", "reason", "created", "until", "in_force"]
    list_filter = ["until"]
    search_fields = ["user__username", "reason"]
    autocomplete_fields = ["user"]
    readonly_fields = ["created_by"]

    @admin.display(boolean=True, description="in force")
    def in_force(self, ban):
        now = timezone.now()
        return ban.created <= now and (ban.until is None or ban.until > now)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["text", "level", "enabled", "starts", "ends"]
    list_filter = ["enabled", "level"]
    search_fields = ["text"]
    list_editable = ["enabled"]


class HostAccountInline(admin.TabularInline):
    model = HostAccount
    extra = 0
    verbose_name = "UNIX account on one host"
    readonly_fields = ["proven_at"]


@admin.register(RunAsAllowance)
class RunAsAllowanceAdmin(admin.ModelAdmin):
    """Superusers only (no object permissions): each entry lets jobs run as a refused account."""

    list_display = ["unix_username", "host", "reason", "created", "created_by"]
    list_filter = ["host"]
    search_fields = ["unix_username", "reason", "host__name"]
    readonly_fields = ["created", "created_by"]

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(UpgradeNote)
class UpgradeNoteAdmin(admin.ModelAdmin):
    """Read and delete only: a note is the upgrade's question; the answer is made elsewhere
    (a profile, an allowance), then the note is deleted."""

    list_display = ["created", "kind", "user", "text"]
    list_filter = ["kind"]
    search_fields = ["text", "user__username"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Profile)
class ProfileAdmin(RestrictedAdminMixin, admin.ModelAdmin):
    list_display = ["user", "unix_username", "time_zone"]
    search_fields = ["user__username", "unix_username", "host_accounts__unix_username"]
    inlines = [HostAccountInline]

    def has_add_permission(self, request):
        return False  # profiles come with users


class ProfileInline(admin.StackedInline):
    model = Profile
    can_delete = False


class BanInline(admin.TabularInline):
    model = Ban
    fk_name = "user"
    extra = 0
    fields = ["reason", "created", "until"]


admin.site.unregister(User)


@admin.register(User)
class HiveUserAdmin(UserAdmin):
    """Django's user admin with the profile and the bans of each user on the same page."""

    inlines = [ProfileInline, BanInline]

    def get_inlines(self, request, obj):
        # A new user gets its profile from a signal; an inline would create a second one.
        return self.inlines if obj is not None else []


# Host admins (object permissions) see and manage only their hosts; superusers assign them
# on a host's "Object permissions" page. Monitoring cannot import us, so we re-register.
admin.site.unregister(Host)
admin.site.unregister(Device)


@admin.register(Host)
class GuardedHostAdmin(RestrictedAdminMixin, ReinforcedGuardedModelAdminMixin, HostAdmin):
    pass


@admin.register(Device)
class GuardedDeviceAdmin(RestrictedAdminMixin, DeviceAdmin):
    pass
