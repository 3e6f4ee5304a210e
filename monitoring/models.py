"""The inventory: the hosts we reach over SSH and the GPUs found on them."""

from collections.abc import Iterable

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F
from django.utils import timezone

# \Z, not $: "$" also matches before a final newline, which would then reach SSH and shells.
address_validator = RegexValidator(
    r"^[A-Za-z0-9](?:[A-Za-z0-9.:\-]*[A-Za-z0-9])?\Z",
    "Enter a host name or an IP address (letters, digits, '.', '-', ':').",
)
# As nvidia-smi -L names them: 1g.10gb, 3g.40gb, 1g.10gb+me, 1c.3g.71gb (a compute instance).
mig_profile_validator = RegexValidator(
    r"^(\d+c\.)?\d+g\.\d+gb(\+[a-z]+)*\Z",
    "Enter a MIG profile as nvidia-smi -L names it, e.g. 1g.10gb or 3g.40gb.",
)
username_validator = RegexValidator(
    r"^[a-z_][a-z0-9_.\-]*\$?\Z", "Enter a UNIX user name (lower case, digits, '_', '-', '.')."
)


class Host(models.Model):
    """A server probed over SSH (or locally, for the machine the service runs on)."""

    class Transport(models.TextChoices):
        SSH = "ssh", "SSH"
        LOCAL = "local", "Local (no SSH)"

    class Status(models.TextChoices):
        UNKNOWN = "unknown", "Not probed yet"
        UP = "up", "Up"
        UNREACHABLE = "unreachable", "Unreachable"
        AUTH_FAILED = "auth_failed", "Authentication failed"
        HOST_KEY_CHANGED = "host_key_changed", "Host key changed"
        ERROR = "error", "Error"

    name = models.SlugField(max_length=100, unique=True, help_text="Short name shown everywhere.")
    address = models.CharField(
        max_length=255, validators=[address_validator], help_text="DNS name or IP address."
    )
    port = models.PositiveIntegerField(
        default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    username = models.CharField(
        max_length=64,
        default="root",
        validators=[username_validator],
        help_text="SSH account used for monitoring.",
    )
    transport = models.CharField(max_length=8, choices=Transport.choices, default=Transport.SSH)
    enabled = models.BooleanField(default=True, help_text="Disabled hosts are not probed.")
    # Read by the reservations app: a booking touching such a host waits as "pending".
    bookings_need_approval = models.BooleanField(
        default=False,
        help_text="Reservations of this host's GPUs stay pending until an admin approves them.",
    )

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.UNKNOWN)
    last_seen = models.DateTimeField(null=True, blank=True, help_text="Last successful probe.")
    last_probe_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # The latest probe, in the shape `manage.py probe --json` prints: pages read this
    # instead of reaching the host themselves.
    last_snapshot = models.JSONField(null=True, blank=True, editable=False)
    last_probe_seconds = models.FloatField(
        null=True, blank=True, help_text="How long the last probe took."
    )
    # The last known hardware (CPU model and cores, RAM, disks, driver and CUDA versions),
    # kept while the host is down so its page still says what it is.
    hardware = models.JSONField(null=True, blank=True, editable=False)

    # Trust on first use: the key seen at first contact, then required on every connect.
    host_key_type = models.CharField(max_length=64, blank=True)
    host_key = models.TextField(blank=True, help_text="Base64 public host key.")
    host_key_fingerprint = models.CharField(max_length=128, blank=True)

    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def is_local(self) -> bool:
        return self.transport == self.Transport.LOCAL

    def forget_host_key(self):
        """Accept whatever key the host presents next (after an admin checked the change)."""
        self.host_key_type = self.host_key = self.host_key_fingerprint = ""
        if self.status == self.Status.HOST_KEY_CHANGED:
            self.status = self.Status.UNKNOWN
        self.save(update_fields=["host_key_type", "host_key", "host_key_fingerprint", "status"])


class Device(models.Model):
    """A GPU, or a MIG slice of one. Kept when it disappears (marked lost): reservations and
    history point at it.

    A GPU in MIG mode (``mig_enabled``) is split into slices, each a Device of its own with
    the GPU as ``parent``, its MIG profile and its ``MIG-`` UUID (what CUDA_VISIBLE_DEVICES
    names): a slice is booked, granted and run on like a GPU, and the GPU stands for the
    whole board (booking it holds every slice). See docs/concepts.md, "MIG slices".
    """

    class Status(models.TextChoices):
        PRESENT = "present", "Present"
        LOST = "lost", "Lost"

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="devices")
    index = models.PositiveIntegerField(
        help_text="nvidia-smi index (PCI bus order); a slice has its GPU's."
    )
    uuid = models.CharField(max_length=128)
    name = models.CharField(max_length=255, blank=True, help_text="GPU model.")
    memory_total_mib = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PRESENT)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    mig_enabled = models.BooleanField(
        default=False, help_text="A GPU in MIG mode: its compute is reached through its slices."
    )
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="slices",
        help_text="The GPU a MIG slice is part of (empty for a GPU).",
    )
    mig_profile = models.CharField(
        max_length=32, blank=True, validators=[mig_profile_validator], help_text="E.g. 1g.10gb."
    )
    mig_index = models.PositiveIntegerField(
        null=True, blank=True, help_text="MIG device number on its GPU (nvidia-smi -L)."
    )

    class Meta:
        # A GPU, then its slices.
        ordering = ["host__name", "index", F("mig_index").asc(nulls_first=True)]
        constraints = [
            models.UniqueConstraint(fields=["host", "uuid"], name="device_unique_uuid_per_host"),
        ]

    def __str__(self):
        return f"{self.host.name}:{self.label}"

    @property
    def number(self) -> str:
        """Its number on its host: "0" for GPU 0, "0.2" for MIG slice 2 of GPU 0."""
        return str(self.index) if self.parent_id is None else f"{self.index}.{self.mig_index}"

    @property
    def label(self) -> str:
        """Its name on its host: "0" for GPU 0, "0.2 (1g.10gb)" for MIG slice 2 of GPU 0."""
        return self.number if self.parent_id is None else f"{self.number} ({self.mig_profile})"

    @property
    def is_slice(self) -> bool:
        return self.parent_id is not None


def sharing(device_ids: Iterable[int]) -> dict[int, list[Device]]:
    """Device id -> the devices that share its hardware, itself first: a GPU and each of its
    MIG slices share (a booking, a task or a process on one blocks the other); two slices of
    one GPU do not. With their hosts, in one query."""
    ids = set(device_ids)
    found = Device.objects.filter(
        models.Q(pk__in=ids) | models.Q(parent_id__in=ids) | models.Q(slices__in=ids)
    )
    devices = {d.pk: d for d in found.select_related("host").distinct()}
    shared: dict[int, list[Device]] = {pk: [devices[pk]] for pk in ids if pk in devices}
    for device in devices.values():
        if device.parent_id in shared:
            shared[device.parent_id].append(device)
        if device.pk in shared and device.parent_id in devices:
            shared[device.pk].append(devices[device.parent_id])
    return shared


def cuda_devices(devices: Iterable[Device]) -> list[str]:
    """What CUDA_VISIBLE_DEVICES names for work on ``devices``, in nvidia-smi's order: a GPU's
    UUID, a MIG slice's MIG UUID, and for a GPU in MIG mode (booked whole) its present
    slices' MIG UUIDs, since CUDA reaches a GPU in MIG mode only through them. Asks the
    database only when such a GPU is among them."""
    named: list[Device] = []
    for device in devices:
        if device.mig_enabled:
            named += device.slices.filter(status=Device.Status.PRESENT)
        else:
            named.append(device)
    named.sort(key=lambda d: (d.index, -1 if d.mig_index is None else d.mig_index))
    return list(dict.fromkeys(d.uuid for d in named))


class WorkerCluster(models.Model):
    """A django-q2 cluster run under the supervisor (``manage.py workers`` or ``serve``).

    The supervisor writes its heartbeat here every few seconds (tasks its workers finished,
    the last one's time) and, when it had to restart a stalled cluster, when and why, so that
    admins see it and ``/healthz`` can tell monitors how old the last finished task is.
    """

    name = models.CharField(max_length=100, unique=True, help_text="Machine and supervisor pid.")
    started_at = models.DateTimeField()
    last_check_at = models.DateTimeField(help_text="The supervisor's last heartbeat.")
    last_task_at = models.DateTimeField(null=True, blank=True)
    tasks_done = models.PositiveBigIntegerField(default=0)
    restarts = models.PositiveIntegerField(default=0)
    last_restart_at = models.DateTimeField(null=True, blank=True)
    last_restart_reason = models.TextField(blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self):
        return self.name


class Resolution(models.IntegerChoices):
    """History tiers: raw samples, then minute and hour averages (step in seconds)."""

    RAW = 0, "raw"
    MINUTE = 60, "minute"
    HOUR = 3600, "hour"


class GpuMetric(models.Model):
    """One GPU's metrics at a time: a raw sample, or the average over one step."""

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="metrics")
    step = models.PositiveIntegerField(choices=Resolution.choices, default=Resolution.RAW)
    time = models.DateTimeField(help_text="Sample time, or the start of the averaged step.")
    utilization_gpu = models.FloatField(null=True)
    utilization_memory = models.FloatField(null=True)
    memory_used_mib = models.FloatField(null=True)
    temperature_c = models.FloatField(null=True)
    power_w = models.FloatField(null=True)

    class Meta:
        # History queries and retention filter by (device, step, time) or (step, time).
        indexes = [
            models.Index(fields=["device", "step", "time"], name="gpumetric_device_step_time"),
            models.Index(fields=["step", "time"], name="gpumetric_step_time"),
        ]

    def __str__(self):
        return f"{self.device_id} @ {self.time:%Y-%m-%d %H:%M:%S} ({self.get_step_display()})"


class HostMetric(models.Model):
    """One host's CPU and RAM at a time: a raw sample, or the average over one step."""

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="metrics")
    step = models.PositiveIntegerField(choices=Resolution.choices, default=Resolution.RAW)
    time = models.DateTimeField()
    cpu_utilization = models.FloatField(null=True)
    memory_used_mib = models.FloatField(null=True)
    memory_total_mib = models.FloatField(null=True)

    class Meta:
        indexes = [
            models.Index(fields=["host", "step", "time"], name="hostmetric_host_step_time"),
            models.Index(fields=["step", "time"], name="hostmetric_step_time"),
        ]

    def __str__(self):
        return f"{self.host_id} @ {self.time:%Y-%m-%d %H:%M:%S} ({self.get_step_display()})"


class DiskMetric(models.Model):
    """Usage of one configured path (MONITORING_DISK_PATHS) on a host at a time.

    A table of its own rather than columns on HostMetric: the paths are a setting, a host
    may lack some of them, and each is averaged and pruned like the other series.
    """

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="disk_metrics")
    path = models.CharField(max_length=255)
    step = models.PositiveIntegerField(choices=Resolution.choices, default=Resolution.RAW)
    time = models.DateTimeField()
    used_mib = models.FloatField(null=True)
    total_mib = models.FloatField(null=True)

    class Meta:
        indexes = [
            models.Index(fields=["host", "step", "time"], name="diskmetric_host_step_time"),
            models.Index(fields=["step", "time"], name="diskmetric_step_time"),
        ]

    def __str__(self):
        return f"{self.host_id}:{self.path} @ {self.time:%Y-%m-%d %H:%M:%S}"


class DashboardLayout(models.Model):
    """What one user chose to see on the live dashboard, and in which order."""

    CHARTS = {
        "gpu_utilization": "GPU utilisation %",
        "gpu_memory": "GPU memory used MiB",
        "gpu_temperature": "GPU temperature °C",
        "gpu_power": "GPU power W",
        "cpu": "CPU utilisation %",
        "ram": "RAM used MiB",
    }

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dashboard_layout"
    )
    # Chart keys from CHARTS, in the order shown; absent keys are hidden.
    charts = models.JSONField(default=list)
    hidden_hosts = models.JSONField(default=list, help_text="Ids of hosts not shown.")

    def __str__(self):
        return f"dashboard of {self.user}"

    @classmethod
    def for_user(cls, user) -> dict:
        layout = cls.objects.filter(user=user).first()
        if layout is None:
            return {"charts": list(cls.CHARTS), "hidden_hosts": []}
        return {"charts": layout.charts, "hidden_hosts": layout.hidden_hosts}
