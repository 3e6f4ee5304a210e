"""Who may use which GPUs and when: grants with weekly windows, bans, profiles, the motd.

Access is denied unless a grant covers it (as in TensorHive). Times of day in windows are
wall-clock times in ``settings.SITE_TIME_ZONE``; see ``accesscontrol.coverage``.
"""

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.zones import site_today, validate_time_zone
from monitoring.models import Device, Host, username_validator

WEEKDAY_NAMES = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def validate_weekdays(value: str) -> None:
    """A weekday set is stored as the digits 0 (Monday) .. 6 (Sunday), each at most once."""
    if not value or any(c not in "0123456" for c in value) or len(set(value)) != len(value):
        raise ValidationError("Choose at least one weekday (digits 0=Mon .. 6=Sun, no repeats).")


class Grant(models.Model):
    """Gives users and/or groups access to devices between two dates, optionally in windows.

    Without windows a grant covers whole days; with windows only the weekly windows count.
    A host-scoped grant covers every GPU of the host, including GPUs found later.
    """

    class Scope(models.TextChoices):
        ALL = "all", "All devices"
        HOSTS = "hosts", "Chosen hosts (all their GPUs, also ones found later)"
        DEVICES = "devices", "Chosen GPUs"

    name = models.CharField(max_length=200, help_text="E.g. 'students on node-3, weekdays'.")
    users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="access_grants"
    )
    groups = models.ManyToManyField(Group, blank=True, related_name="access_grants")
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.ALL)
    hosts = models.ManyToManyField(Host, blank=True, related_name="access_grants")
    devices = models.ManyToManyField(Device, blank=True, related_name="access_grants")
    valid_from = models.DateField(default=site_today, help_text="First day (site time zone).")
    valid_until = models.DateField(
        null=True, blank=True, help_text="Last day it applies (inclusive); empty: no end."
    )
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(valid_until__isnull=True) | Q(valid_until__gte=models.F("valid_from")),
                name="grant_ends_after_it_starts",
            )
        ]

    def __str__(self):
        return self.name

    def clean(self):
        if self.valid_until and self.valid_from and self.valid_until < self.valid_from:
            raise ValidationError({"valid_until": "The last day cannot be before the first day."})

    def covers_device(self, device: Device) -> bool:
        """Whether the grant's scope includes ``device`` (uses prefetched hosts/devices).
        A grant of a GPU covers its MIG slices; a grant of a slice covers that slice only."""
        if self.scope == self.Scope.ALL:
            return True
        if self.scope == self.Scope.HOSTS:
            return any(host.pk == device.host_id for host in self.hosts.all())
        return any(d.pk in (device.pk, device.parent_id) for d in self.devices.all())


class Window(models.Model):
    """A weekly window of a grant, in site wall-clock time.

    It opens on each chosen weekday at ``start`` and closes at the next ``end``: when ``end``
    is not after ``start`` it closes the following day (Fri 22:00 -> Sat 06:00), and
    ``start == end`` means a full day.
    """

    grant = models.ForeignKey(Grant, on_delete=models.CASCADE, related_name="windows")
    weekdays = models.CharField(
        max_length=7, validators=[validate_weekdays], help_text="Days the window opens on."
    )
    start = models.TimeField()
    end = models.TimeField(help_text="Not after start: the window ends the next day.")

    class Meta:
        ordering = ["grant", "pk"]

    def __str__(self):
        days = ", ".join(WEEKDAY_NAMES[int(d)] for d in sorted(self.weekdays))
        return f"{days} {self.start:%H:%M}–{self.end:%H:%M}"

    def save(self, *args, **kwargs):
        self.weekdays = "".join(sorted(set(self.weekdays)))
        super().save(*args, **kwargs)

    @property
    def weekday_set(self) -> frozenset[int]:
        return frozenset(int(d) for d in self.weekdays)


class Ban(models.Model):
    """Blocks a user from new reservations and job launches until ``until`` (or for good)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="bans"
    )
    reason = models.TextField(help_text="Shown to the user.")
    until = models.DateTimeField(null=True, blank=True, help_text="Empty: until lifted.")
    created = models.DateTimeField(default=timezone.now, help_text="When the ban starts.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created"]

    def __str__(self):
        return f"{self.user} banned: {self.reason}"

    def clean(self):
        if self.until and self.created and self.until <= self.created:
            raise ValidationError({"until": "The ban must end after it starts."})


class Profile(models.Model):
    """What the service needs to know about a user beyond Django's account."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile"
    )
    unix_username = models.CharField(
        max_length=64,
        blank=True,
        validators=[username_validator],
        help_text="Account on every host without a per-host account; empty: none (the web "
        "user name is never taken as a UNIX name).",
    )
    time_zone = models.CharField(
        max_length=64,
        blank=True,
        validators=[validate_time_zone],
        help_text="For showing times to this user; empty: the site time zone.",
    )

    class Meta:
        ordering = ["user__username"]

    def __str__(self):
        return f"profile of {self.user}"

    def unix_username_for(self, host: Host) -> str:
        """The user's account name on ``host``: a per-host account, else the usual one ("":
        none). Never the web user name: an admin who creates web user ``postgres`` must not
        hand out that account by accident."""
        for account in self.host_accounts.all():
            if account.host_id == host.pk:
                return account.unix_username
        return self.unix_username


class HostAccount(models.Model):
    """A user's UNIX account on one particular host (set by an admin, or proven at sign-up)."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="host_accounts")
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="user_accounts")
    unix_username = models.CharField(max_length=64, validators=[username_validator])
    proven_at = models.DateTimeField(
        null=True, blank=True, help_text="When self-sign-up proved the account on this host."
    )

    class Meta:
        ordering = ["host__name"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "host"], name="one_account_per_host"),
        ]

    def __str__(self):
        return f"{self.unix_username}@{self.host}"


class RunAsAllowance(models.Model):
    """An admin's explicit leave to run jobs as an account the rules refuse (root, a system
    account below RUN_AS_MIN_UID, a host's monitoring account, the service's own account).
    Created and deleted entries are audited (``accesscontrol.audited``)."""

    unix_username = models.CharField(max_length=64, validators=[username_validator])
    host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.CASCADE, help_text="Empty: every host."
    )
    reason = models.CharField(max_length=200, help_text="Why this account may run jobs.")
    created = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["unix_username"]
        verbose_name = "run-as allowance"

    def __str__(self):
        return f"{self.unix_username}@{self.host or 'every host'} allowed: {self.reason}"


class AccessChange(models.Model):
    """One row whose token the database sets anew with every change to the facts access is
    decided from (accesscontrol.changes): processes keep those facts while it stays."""

    token = models.CharField(max_length=64)

    class Meta:
        verbose_name = "access change token"

    def __str__(self):
        return self.token


class UpgradeNoteQuerySet(models.QuerySet):
    def open(self):
        """Notes still waiting for an admin. One about a user's UNIX name is settled once the
        user has an account (usual or on some host), whichever the admin chose."""
        named = Profile.objects.filter(Q(unix_username__gt="") | Q(host_accounts__isnull=False))
        return self.exclude(kind=UpgradeNote.Kind.UNIX_NAME, user__in=named.values("user"))


class UpgradeNote(models.Model):
    """Something an upgrade's data migration could not decide alone (e.g. whether a user's
    empty UNIX name, which once meant his user name ``root``, should now name an account).
    ``doctor``, ``check --tag upgrade`` and ``/healthz`` show the open ones; the admin deletes
    a note once decided."""

    class Kind(models.TextChoices):
        UNIX_NAME = "unix name", "UNIX account name"
        RUN_AS = "run as", "Run-as allowance"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    text = models.TextField()
    created = models.DateTimeField(default=timezone.now)

    objects = UpgradeNoteQuerySet.as_manager()

    class Meta:
        ordering = ["created", "pk"]
        verbose_name = "note left by an upgrade"
        verbose_name_plural = "notes left by an upgrade"

    def __str__(self):
        return self.text[:80]


class MessageQuerySet(models.QuerySet):
    def active(self, at=None):
        at = at or timezone.now()
        return self.filter(Q(ends__isnull=True) | Q(ends__gt=at), enabled=True, starts__lte=at)


class Message(models.Model):
    """The message of the day: a banner on every page while it is active."""

    class Level(models.TextChoices):
        INFO = "info", "Information"
        WARNING = "warning", "Warning"

    text = models.TextField()
    level = models.CharField(max_length=8, choices=Level.choices, default=Level.INFO)
    enabled = models.BooleanField(default=True)
    starts = models.DateTimeField(default=timezone.now)
    ends = models.DateTimeField(null=True, blank=True, help_text="Empty: until disabled.")

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering = ["-starts"]
        verbose_name = "message of the day"
        verbose_name_plural = "messages of the day"

    def __str__(self):
        return self.text[:60]
