"""Queue API: the signed-in user's queued jobs (admins see all), with their place in the
queue and why they wait; POST queues a job, DELETE or POST .../cancel/ takes it out."""

from django.conf import settings
from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accesscontrol.permissions import RestrictedViewSetMixin
from allocation import placing, rule
from allocation.placement import Request
from core.ids import IdField
from core.pagination import LinkHeaderPagination, paged
from jobs.api import literal_values
from monitoring.models import Device, Host, mig_profile_validator

from . import services
from .models import QueuedJob, QueuedTask, QueueRun


class QueuedTaskSerializer(serializers.ModelSerializer):
    devices = IdField(many=True, queryset=Device.objects.all(), required=False, default=list)
    host = IdField(queryset=Host.objects.all(), required=False, allow_null=True, default=None)
    parameters = literal_values()
    env = literal_values()

    class Meta:
        model = QueuedTask
        fields = [
            "template",
            "parameters",
            "env",
            "kind",
            "gpu_count",
            "devices",
            "host",
            "gpu_model",
            "min_memory_mib",
            "mig_profile",
        ]


class QueueRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = QueueRun
        fields = ["job", "opportunistic", "gpus", "started_at", "ended_at", "outcome"]


class QueuedJobSerializer(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    group = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    position = serializers.SerializerMethodField(
        help_text="Place among all waiting jobs (1 = next); null when not waiting."
    )
    tasks = QueuedTaskSerializer(many=True, read_only=True)
    runs = QueueRunSerializer(many=True, read_only=True)

    class Meta:
        model = QueuedJob
        fields = [
            "id",
            "name",
            "owner",
            "group",
            "priority",
            "opportunistic",
            "requeue_on_preemption",
            "state",
            "position",
            "reasons",
            "reasons_at",
            "stop_reason",
            "enqueued_at",
            "tasks",
            "runs",
        ]

    def get_position(self, queued) -> int | None:
        positions = self.context.get("positions")
        if positions is None:
            positions = services.positions()
        return positions.get(queued.pk)


class EnqueueSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    tasks = QueuedTaskSerializer(many=True, max_length=settings.JOBS_MAX_TASKS)
    priority = serializers.IntegerField(default=0)
    opportunistic = serializers.BooleanField(default=False)
    requeue_on_preemption = serializers.BooleanField(default=True)
    group = IdField(
        queryset=Group.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="Whose quota it counts against (default: your first group with a quota).",
    )


def task_request(row: dict) -> services.TaskRequest:
    return services.TaskRequest(
        template=row["template"],
        kind=row.get("kind", QueuedTask.Kind.ONE_HOST),
        gpu_count=row.get("gpu_count", 1),
        devices=list(row.get("devices", [])),
        host=row.get("host"),
        gpu_model=row.get("gpu_model", ""),
        min_memory_mib=row.get("min_memory_mib"),
        mig_profile=row.get("mig_profile", ""),
        parameters=row.get("parameters", {}),
        env=row.get("env", {}),
    )


class QueuedJobViewSet(
    RestrictedViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Queued jobs of the signed-in user (all for admins); ?state=waiting|running|... filters."""

    queryset = QueuedJob.objects.select_related("owner", "group").prefetch_related(
        "tasks__devices", "runs"
    )
    serializer_class = QueuedJobSerializer

    def get_queryset(self):
        queryset = super().get_queryset()
        wanted = self.request.query_params.get("state")
        return queryset.filter(state=wanted) if wanted else queryset

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "positions": services.positions()}

    @extend_schema(request=EnqueueSerializer, responses={201: QueuedJobSerializer})
    def create(self, request):
        data = EnqueueSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        data = data.validated_data
        # A service's ValidationError / PermissionDenied become the API's 400 / 403 in
        # core.api_errors.exception_handler.
        queued = services.enqueue(
            request.user,
            name=data["name"],
            tasks=[task_request(row) for row in data["tasks"]],
            priority=data["priority"],
            opportunistic=data["opportunistic"],
            requeue_on_preemption=data["requeue_on_preemption"],
            group=data["group"],
        )
        body = QueuedJobSerializer(queued, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=QueuedJobSerializer)
    @action(detail=True, methods=["post"], serializer_class=serializers.Serializer)
    def cancel(self, request, pk=None):
        """Take the job out of the queue (a running one is stopped gracefully first)."""
        queued = services.cancel(self.get_object(), request.user)
        return Response(QueuedJobSerializer(queued, context=self.get_serializer_context()).data)

    def perform_destroy(self, queued):
        services.cancel(queued, self.request.user)


# --- placement: where work could start now ---------------------------------------------------


class ReasonSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=rule.CODES, help_text="Stable: scripts may test it.")
    device = serializers.IntegerField(help_text="The GPU's id.")
    detail = serializers.CharField(help_text="The reason, for people.")
    lasting = serializers.BooleanField(
        help_text="Waiting cannot lift it, only an admin can (no grant now or later, no "
        "account, a ban without end, a GPU gone): queueing for this GPU would wait for ever."
    )


class GpuUsabilitySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    host = serializers.CharField()
    index = serializers.IntegerField()
    model = serializers.CharField()
    memory_total_mib = serializers.IntegerField(allow_null=True)
    mig_profile = serializers.CharField(help_text="A MIG slice's profile ('' for a GPU).")
    mig_index = serializers.IntegerField(
        allow_null=True, help_text="A MIG slice's number on its GPU (null for a GPU)."
    )
    usable = serializers.BooleanField(help_text="You may start work on it now.")
    reasons = ReasonSerializer(many=True, help_text="Why not (empty when usable).")


def usability_row(device: Device, reasons) -> dict:
    return {
        "id": device.pk,
        "host": device.host.name,
        "index": device.index,
        "model": device.name,
        "memory_total_mib": device.memory_total_mib,
        "mig_profile": device.mig_profile,
        "mig_index": device.mig_index,
        "usable": not reasons,
        "reasons": [r.as_dict() for r in reasons],
    }


class PlacementRequestSerializer(serializers.Serializer):
    count = serializers.IntegerField(
        min_value=1, max_value=1024, default=1, help_text="How many GPUs (without devices)."
    )
    spread = serializers.ChoiceField(
        choices=[QueuedTask.Kind.ONE_HOST, QueuedTask.Kind.ANY_HOSTS],
        default=QueuedTask.Kind.ONE_HOST,
        help_text="one_host: all on one host; any_hosts: on as few hosts as fit.",
    )
    host = IdField(queryset=Host.objects.all(), required=False, allow_null=True, default=None)
    devices = IdField(
        many=True,
        queryset=Device.objects.all(),
        required=False,
        default=list,
        help_text="These GPUs exactly (count and spread are then ignored).",
    )
    model = serializers.CharField(required=False, default="", allow_blank=True, max_length=255)
    min_memory_mib = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1
    )
    mig_profile = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=32,
        validators=[mig_profile_validator],
        help_text="MIG slices of this profile, e.g. 1g.10gb, instead of GPUs.",
    )

    def request(self) -> Request:
        data = self.validated_data
        if data["devices"]:
            return Request("devices", device_ids=tuple(d.pk for d in data["devices"]))
        host = data["host"]
        return Request(
            data["spread"],
            count=data["count"],
            host_id=host.pk if host else None,
            model=data["model"],
            min_memory_mib=data["min_memory_mib"],
            mig_profile=data["mig_profile"],
        )


class PlacementSerializer(serializers.Serializer):
    placed = serializers.BooleanField(help_text="Whether GPUs were found.")
    devices = serializers.ListField(child=serializers.IntegerField(), help_text="Chosen ids.")
    gpus = GpuUsabilitySerializer(many=True, help_text="The chosen GPUs.")
    detail = serializers.CharField(help_text="Why nothing fits, for people ('' when placed).")
    reasons = ReasonSerializer(many=True, help_text="Every reason, per GPU that would fit.")


class PlacementViewSet(viewsets.ViewSet):
    """Where you could start work now, decided by the server with the start rule.

    GET: every GPU with whether you may start on it now and, if not, why (stable codes).
    POST: choose GPUs for a request (N on one host / anywhere / these GPUs, optional model
    and memory) as the queue would; nothing is reserved or started.
    """

    pagination_class = LinkHeaderPagination

    @extend_schema(responses=GpuUsabilitySerializer(many=True))
    def list(self, request):
        rows = placing.usability(request.user)
        return paged(request, self, [usability_row(device, reasons) for device, reasons in rows])

    @extend_schema(request=PlacementRequestSerializer, responses={200: PlacementSerializer})
    def create(self, request):
        asked = PlacementRequestSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        found = placing.place(request.user, asked.request())
        return Response(
            {
                "placed": found.placed,
                "devices": [d.pk for d in found.devices],
                "gpus": [usability_row(d, []) for d in found.devices],
                "detail": found.detail,
                "reasons": [r.as_dict() for r in found.reasons],
            }
        )
