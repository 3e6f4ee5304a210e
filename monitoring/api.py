"""Read-only monitoring API: every signed-in user may see the lab; admins edit in the admin.

Devices carry their latest metrics from the stored snapshot; ``history`` actions return
averaged series for a time range; ``/api/processes/`` lists the GPU processes seen last.
"""

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.pagination import LinkHeaderPagination, paged

from .history import DISK_FIELDS, GPU_FIELDS, HOST_FIELDS, retention_limits
from .models import Device, DiskMetric, GpuMetric, Host, HostMetric, Resolution
from .visibility import process_visibility, visible_processes

MAX_POINTS = 5000


class HostSerializer(serializers.ModelSerializer):
    latest = serializers.SerializerMethodField(help_text="CPU and RAM from the last probe.")

    class Meta:
        model = Host
        fields = [
            "id",
            "name",
            "address",
            "port",
            "enabled",
            "status",
            "last_seen",
            "last_probe_at",
            "last_probe_seconds",
            "last_error",
            "host_key_fingerprint",
            "latest",
            "hardware",
        ]

    def get_latest(self, host) -> dict | None:
        if host.status != Host.Status.UP or not host.last_snapshot:
            return None
        return host.last_snapshot.get("cpu")


class DeviceSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    latest = serializers.SerializerMethodField(
        help_text="Metrics from the host's last probe; null when the host or GPU is not up."
    )

    class Meta:
        model = Device
        fields = [
            "id",
            "host",
            "index",
            "uuid",
            "name",
            "memory_total_mib",
            "status",
            "first_seen",
            "last_seen",
            "mig_enabled",
            "parent",
            "mig_profile",
            "mig_index",
            "latest",
        ]
        read_only_fields = ["parent"]

    def get_latest(self, device) -> dict | None:
        host = device.host
        if host.status != Host.Status.UP or device.status != Device.Status.PRESENT:
            return None
        snapshot = host.last_snapshot or {}
        for gpu in [*(snapshot.get("gpus") or []), *(snapshot.get("slices") or [])]:
            if gpu.get("uuid") == device.uuid:
                return {field: gpu.get(field) for field in GPU_FIELDS}
        return None


class RangeSerializer(serializers.Serializer):
    """History query: ISO 8601 times with an offset; resolution chosen from the span."""

    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    resolution = serializers.ChoiceField(
        choices=[label for _, label in Resolution.choices], required=False
    )

    def validate(self, data):
        until = data.get("until") or timezone.now()
        try:
            since = data.get("since") or until - timedelta(hours=1)
        except OverflowError:  # an until in the first hour of year 1
            raise serializers.ValidationError({"until": "until is too early."}) from None
        if since >= until:
            raise serializers.ValidationError({"since": "since must be before until."})
        label = data.get("resolution")
        step = _step_named(label) if label else choose_step(since, until)
        if (until - since).total_seconds() / max(step, 10) > MAX_POINTS:
            raise serializers.ValidationError(
                {"resolution": f"Too many points at this resolution (at most {MAX_POINTS})."}
            )
        return {"since": since, "until": until, "step": step}


def _step_named(label: str) -> int:
    return next(value for value, name in Resolution.choices if name == label)


def choose_step(since, until) -> int:
    """The finest tier that still holds data back to since and keeps the chart readable."""
    limits = retention_limits(timezone.now())
    span = until - since
    if span <= timedelta(hours=3) and since >= limits[Resolution.RAW]:
        return Resolution.RAW
    if span <= timedelta(days=3) and since >= limits[Resolution.MINUTE]:
        return Resolution.MINUTE
    return Resolution.HOUR


class HistorySerializer(serializers.Serializer):
    """A metric series: one object per sample, with ``time`` and the metric fields."""

    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    resolution = serializers.ChoiceField(choices=[label for _, label in Resolution.choices])
    samples = serializers.ListField(child=serializers.DictField())


class HostHistorySerializer(HistorySerializer):
    host = serializers.IntegerField()


class DeviceHistorySerializer(HistorySerializer):
    device = serializers.IntegerField()


class ContainerSerializer(serializers.Serializer):
    """The Docker, Podman or Kubernetes container a GPU process runs in."""

    id = serializers.CharField(help_text="Short id (12 hex digits).")
    name = serializers.CharField(help_text="Empty when its engine could not be asked.")
    runtime = serializers.CharField(
        help_text="docker, podman, containerd, cri-o or kubernetes; empty when unsure."
    )


class ProcessSerializer(serializers.Serializer):
    """A GPU process from its host's last probe."""

    host = serializers.CharField()
    device = serializers.IntegerField(allow_null=True, help_text="null: GPU not in the inventory")
    gpu_index = serializers.IntegerField(allow_null=True)
    gpu_uuid = serializers.CharField()
    pid = serializers.IntegerField(allow_null=True)
    user = serializers.CharField(
        allow_null=True,
        help_text="The owner's UNIX account (in a container: its owner label's, or the "
        "rootless user's); null: unknown.",
    )
    command = serializers.CharField()
    memory_mib = serializers.IntegerField(allow_null=True)
    container = ContainerSerializer(allow_null=True, help_text="null: not in a container.")
    owner_text = serializers.CharField(
        help_text='Whose it is, in words: "alice", "alice (container train-3)", '
        '"container train-3 (owner unknown)", "unknown owner".'
    )


def history_response(request, rows, owner: dict, fields: list[str], extra=None) -> Response:
    """The series of rows over the requested range; ``extra(range)`` adds more keys."""
    query = RangeSerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    span = tuple(query.validated_data[k] for k in ("since", "until", "step"))
    since, until, step = span
    return Response(
        {
            **owner,
            "since": since,
            "until": until,
            "resolution": Resolution(step).label,
            "samples": samples_in(rows, span, fields),
            **(extra(span) if extra else {}),
        }
    )


def samples_in(rows, span, fields: list[str]) -> list[dict]:
    since, until, step = span
    rows = rows.filter(step=step, time__gte=since, time__lt=until).order_by("time")
    return list(rows.values("time", *fields))


def disk_series(host: Host, span) -> dict:
    """{"disks": {path: samples}} for the host's measured paths over the same range."""
    disks = {}
    for row in samples_in(DiskMetric.objects.filter(host=host), span, ["path", *DISK_FIELDS]):
        disks.setdefault(row.pop("path"), []).append(row)
    return {"disks": disks}


class HostViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Host.objects.all()
    serializer_class = HostSerializer

    @extend_schema(parameters=[RangeSerializer], responses=HostHistorySerializer)
    @action(detail=True)
    def history(self, request, pk=None):
        """CPU, RAM and disks over ?since=&until= (ISO 8601), optionally
        ?resolution=raw|minute|hour; ``disks`` maps each measured path to its samples."""
        host = self.get_object()
        rows = HostMetric.objects.filter(host=host)
        return history_response(
            request, rows, {"host": host.pk}, HOST_FIELDS, lambda span: disk_series(host, span)
        )


class DeviceViewSet(viewsets.ReadOnlyModelViewSet):
    # The host by prefetch, not a join: one Host per host, so its snapshot (every GPU's
    # metrics) is read once, not once for each of its GPUs.
    queryset = Device.objects.prefetch_related("host")
    serializer_class = DeviceSerializer

    @extend_schema(parameters=[RangeSerializer], responses=DeviceHistorySerializer)
    @action(detail=True)
    def history(self, request, pk=None):
        """GPU metrics over ?since=&until= (ISO 8601), optionally ?resolution=raw|minute|hour."""
        device = self.get_object()
        rows = GpuMetric.objects.filter(device=device)
        return history_response(request, rows, {"device": device.pk}, GPU_FIELDS)


class ProcessViewSet(viewsets.ViewSet):
    """GPU processes seen by the last probe of each up host; filter with ?host= and ?user=."""

    serializer_class = ProcessSerializer
    pagination_class = LinkHeaderPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("host", str, description="Only this host (by name)."),
            OpenApiParameter("user", str, description="Only this UNIX user's processes."),
        ]
    )
    def list(self, request):
        hosts = Host.objects.filter(enabled=True, status=Host.Status.UP).prefetch_related("devices")
        if request.query_params.get("host"):
            hosts = hosts.filter(name=request.query_params["host"])
        user = request.query_params.get("user")
        visibility = process_visibility(request.user)  # other users' command lines hidden
        rows = [
            row for host in hosts for row in visible_processes(visibility, host, process_rows(host))
        ]
        return paged(request, self, [row for row in rows if not user or row["user"] == user])


def process_rows(host: Host) -> list[dict]:
    devices = {d.uuid: d for d in host.devices.all()}
    rows = []
    for process in (host.last_snapshot or {}).get("processes") or []:
        device = devices.get(process.get("gpu_uuid"))
        rows.append(
            {
                "host": host.name,
                "device": device.pk if device else None,
                "gpu_index": device.index if device else None,
                **process,
            }
        )
    return rows
