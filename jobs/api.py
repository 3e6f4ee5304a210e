"""Jobs API: the owner's jobs and tasks (admins see all), creation from task rows, a grid or
a distributed template, actions on one task or many, logs.

The services' ValidationError and PermissionDenied become 400 and 403 answers in the project's
exception handler (core/api_errors.py)."""

import shlex

from django.conf import settings
from django.db import transaction
from django.db.models import Prefetch
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accesscontrol.permissions import RestrictedViewSetMixin, can
from core.api_errors import Conflict
from core.ids import IdField, id_list, is_whole_number
from monitoring.models import Device, Host
from reservations.models import Reservation

from . import actions, distributed, guided, services, templating
from .forms import parse_pairs
from .models import Job, Task, TaskAction


def attach_hint(task: Task) -> str:
    """How the owner reaches the running task's terminal."""
    if not task.screen_session or task.status not in Task.ACTIVE:
        return ""
    # -t: screen needs a terminal, and ssh gives a remote command none unless asked.
    port = ["-p", str(task.host.port)] if task.host.port != 22 else []
    login = f"{task.unix_username}@{task.host.address}"
    return shlex.join(["ssh", "-t", *port, login, "screen", "-x", task.screen_session])


class TaskSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    command_line = serializers.SerializerMethodField(help_text="Environment and command.")
    attach = serializers.SerializerMethodField(help_text="How to attach to the screen session.")
    pending_action = serializers.SerializerMethodField(
        help_text="The action the workers have yet to carry out on the task (null: none)."
    )
    status_display = serializers.CharField(
        source="get_status_display", read_only=True, help_text="The status in words."
    )
    host_unreachable_since = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="For an active task whose host stopped answering: when the host last "
        "answered (null: it answers). Such a task waits for its host: whether it still runs "
        "is unknown until the host is back.",
    )

    class Meta:
        model = Task
        fields = [
            "id",
            "job",
            "host",
            "devices",
            "template",
            "parameters",
            "env",
            "command",
            "command_line",
            "status",
            "status_display",
            "host_unreachable_since",
            "error",
            "unix_username",
            "screen_session",
            "attach",
            "pending_action",
            "log_path",
            "pid",
            "exit_code",
            "started_at",
            "ended_at",
            "scheduled_start",
            "scheduled_stop",
            "reservation",
            "argv",
            "rerun_as",
        ]
        read_only_fields = [f for f in fields if f not in ("scheduled_start", "scheduled_stop")]

    def get_command_line(self, task) -> str:
        return templating.command_line(services.task_env(task), task.command)

    def get_attach(self, task) -> str:
        return attach_hint(task)

    def get_pending_action(self, task) -> str | None:
        return pending_action(task)


# Open actions, fetched with the tasks (one query per list, not per task).
OPEN_ACTIONS = Prefetch(
    "actions", queryset=TaskAction.objects.filter(done_at=None), to_attr="open_actions"
)


def pending_action(task: Task) -> str | None:
    """The latest action asked for on the task that the workers have not carried out."""
    opened = getattr(task, "open_actions", None)
    if opened is None:
        opened = list(task.actions.filter(done_at=None))
    latest = max(opened, key=lambda a: (a.requested_at, a.pk), default=None)
    return latest.action if latest else None


class JobSerializer(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    status = serializers.CharField(read_only=True)
    tasks = TaskSerializer(many=True, read_only=True)

    class Meta:
        model = Job
        fields = ["id", "name", "description", "template", "owner", "status", "created", "tasks"]


def literal_values() -> serializers.DictField:
    """Parameters or environment as NAME: value, each value kept exactly as sent: the manual
    promises literal arguments (docs/concepts.md, Jobs and tasks), so no trimming (a trailing
    newline or space is the user's)."""
    child = serializers.CharField(allow_blank=True, trim_whitespace=False)
    return serializers.DictField(child=child, default=dict)


class TaskRowSerializer(serializers.Serializer):
    host = IdField(queryset=Host.objects.all())
    devices = IdField(many=True, queryset=Device.objects.all(), required=False, default=list)
    template = serializers.CharField(required=False, help_text="Default: the job's template.")
    parameters = literal_values()
    env = literal_values()
    scheduled_start = serializers.DateTimeField(required=False, allow_null=True)
    scheduled_stop = serializers.DateTimeField(required=False, allow_null=True)
    reservation = IdField(queryset=Reservation.objects.all(), required=False, allow_null=True)


class JobCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    template = serializers.CharField(required=False, allow_blank=True, default="")
    tasks = TaskRowSerializer(many=True, max_length=settings.JOBS_MAX_TASKS)


class GridSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    template = serializers.CharField()
    host = IdField(queryset=Host.objects.all())
    devices = IdField(many=True, queryset=Device.objects.all(), required=False, default=list)
    values = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField(trim_whitespace=False))
    )
    env = literal_values()
    samples = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    seed = serializers.IntegerField(required=False, allow_null=True)


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
            {"type": "string", "description": "One line per name: `name: v1, v2`."},
        ]
    }
)
class ValueListsField(serializers.DictField):
    """{name: [values]}, or the guided form's text of them (templating.parse_value_lists)."""

    def __init__(self, **kwargs):
        values = serializers.ListField(child=serializers.CharField(trim_whitespace=False))
        super().__init__(child=values, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str):
            return templating.parse_value_lists(data)
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "object", "additionalProperties": {"type": "string"}},
            {"type": "string", "description": "One line per variable: `NAME=value`."},
        ]
    }
)
class EnvField(serializers.DictField):
    """{NAME: value}, or the forms' text of them (jobs.forms.parse_pairs); valid names only."""

    def __init__(self, **kwargs):
        super().__init__(
            child=serializers.CharField(allow_blank=True, trim_whitespace=False), **kwargs
        )

    def to_internal_value(self, data):
        if isinstance(data, str):
            return templating.check_env(parse_pairs(data, "Environment"))
        return templating.check_env(super().to_internal_value(data))


class PreviewSerializer(serializers.Serializer):
    """The fields of a grid that decide its commands; nothing else is needed, or saved."""

    template = serializers.CharField()
    values = ValueListsField(required=False, default=dict)
    env = EnvField(required=False, default=dict)
    samples = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)
    seed = serializers.IntegerField(required=False, allow_null=True, default=None)

    def validate_template(self, template: str) -> str:
        templating.fields_of(template)  # refuses bad syntax, as creating the job would
        return template


PREVIEW = inline_serializer(
    "Preview",
    {
        "count": serializers.IntegerField(help_text="How many tasks it makes."),
        "commands": serializers.ListField(
            child=serializers.CharField(), help_text="The first 20 command lines, as they run."
        ),
    },
)


class NodeSerializer(serializers.Serializer):
    host = IdField(queryset=Host.objects.all())
    devices = IdField(many=True, queryset=Device.objects.all(), required=False, default=list)


class DistributedSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    kind = serializers.ChoiceField(choices=list(distributed.KINDS.items()))
    nodes = NodeSerializer(many=True, max_length=settings.JOBS_MAX_TASKS)
    command = serializers.CharField(help_text="Script and arguments (torchrun) or command.")
    launcher = serializers.CharField(required=False, default="torchrun")
    nproc_per_node = serializers.IntegerField(required=False, default=1, min_value=1)
    parameters = literal_values()
    env = literal_values()


class ActionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=services.ACTIONS)
    tasks = id_list(required=False, default=list)
    jobs = id_list(required=False, default=list)


# What the actions and the log answer, for the OpenAPI schema.
ACTION_RESULTS = inline_serializer(
    "ActionResults",
    {
        "results": inline_serializer(
            "ActionResult",
            {
                "task": serializers.IntegerField(),
                "status": serializers.CharField(),
                "error": serializers.CharField(),
            },
            many=True,
        )
    },
)
LOG_PIECE = inline_serializer(
    "LogPiece",
    {
        "size": serializers.IntegerField(),
        "offset": serializers.IntegerField(),
        "next_offset": serializers.IntegerField(),
        "text": serializers.CharField(),
        "complete": serializers.BooleanField(
            help_text="The task had ended when the log was fetched: nothing more will come."
        ),
        "status": serializers.ChoiceField(
            choices=Task.Status.choices, help_text="The task's status now."
        ),
        "exit_code": serializers.IntegerField(allow_null=True),
    },
)


def _input(request, serializer_class) -> dict:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _results(results) -> Response:
    """202: the actions are the workers' now; each task's state ("starting", "stopping") or
    why it was refused. Statuses are read again, in one query."""
    now = dict(Task.objects.filter(pk__in=[t.pk for t, _ in results]).values_list("pk", "status"))
    return Response(
        {"results": [{"task": t.pk, "status": now[t.pk], "error": e} for t, e in results]},
        status=status.HTTP_202_ACCEPTED,
    )


def specs_from_rows(data) -> list[services.TaskSpec]:
    return [
        services.TaskSpec(
            host=row["host"],
            template=row.get("template") or data["template"],
            parameters=row["parameters"],
            env=row["env"],
            devices=row["devices"],
            scheduled_start=row.get("scheduled_start"),
            scheduled_stop=row.get("scheduled_stop"),
            reservation=row.get("reservation"),
        )
        for row in data["tasks"]
    ]


class JobViewSet(
    RestrictedViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Jobs of the signed-in user (all jobs for admins). POST creates from task rows."""

    queryset = Job.objects.select_related("owner").prefetch_related(
        "tasks__host",
        "tasks__devices",
        Prefetch("tasks__actions", OPEN_ACTIONS.queryset, to_attr="open_actions"),
    )
    serializer_class = JobSerializer

    def _created(self, job) -> Response:
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)

    def _create(self, data, specs, template) -> Response:
        """Create the job from its specs, as the requesting user, and answer 201 with it."""
        job = services.create_job(
            self.request.user,
            name=data["name"],
            specs=specs,
            description=data["description"],
            template=template,
        )
        return self._created(job)

    @extend_schema(request=JobCreateSerializer, responses={201: JobSerializer})
    def create(self, request):
        data = _input(request, JobCreateSerializer)
        return self._create(data, specs_from_rows(data), data["template"])

    @extend_schema(responses={201: JobSerializer})
    @action(detail=False, methods=["post"], serializer_class=GridSerializer)
    def grid(self, request):
        """One task per combination of the value lists (or `samples` of them, with `seed`)."""
        data = _input(request, GridSerializer)
        return self._create(data, services.grid_specs(data), data["template"])

    @extend_schema(responses={200: PREVIEW})
    @action(detail=False, methods=["post"], serializer_class=PreviewSerializer)
    def preview(self, request):
        """How many tasks a grid of `values` (or `samples` of it) makes, and their first
        command lines, built by the code that creates them; nothing is saved. The guided
        form's live preview."""
        return Response(guided.preview(_input(request, PreviewSerializer)))

    @extend_schema(responses={201: JobSerializer})
    @action(detail=False, methods=["post"], serializer_class=DistributedSerializer)
    def distributed(self, request):
        """One task per node from a PyTorch or TensorFlow template (ports picked now)."""
        data = _input(request, DistributedSerializer)
        nodes = [distributed.Node(n["host"], n["devices"]) for n in data["nodes"]]
        template, specs = distributed.specs_from(request.user, data, nodes)
        return self._create(data, specs, template)

    @extend_schema(responses={202: ACTION_RESULTS})
    @action(detail=True, methods=["post"], serializer_class=ActionSerializer)
    def act(self, request, pk=None):
        """{"action": spawn|interrupt|terminate|kill|stop} on every task of the job it fits;
        answered at once (202), carried out by the workers (see each task's status)."""
        data = _input(request, ActionSerializer)
        job = self.get_object()
        return _results(actions.request_all(list(job.tasks.all()), request.user, data["action"]))

    @extend_schema(request=None, responses={201: JobSerializer})
    @action(detail=True, methods=["post"], serializer_class=serializers.Serializer)
    def duplicate(self, request, pk=None):
        """A pending copy of the job, owned by (and run as) whoever duplicates it."""
        return self._created(services.duplicate_job(self.get_object(), request.user))

    def perform_destroy(self, job):
        if not can(self.request.user, "delete", job):
            raise exceptions.PermissionDenied("Only the job's owner or an admin can delete it.")
        if job.tasks.filter(status__in=Task.ACTIVE).exists():
            raise exceptions.ValidationError({"detail": "Stop the job's running tasks first."})
        job.delete()


class TaskViewSet(
    RestrictedViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Tasks of the signed-in user's jobs. PATCH sets a pending task's scheduled start/stop."""

    queryset = Task.objects.select_related("host", "job__owner").prefetch_related(
        "devices", OPEN_ACTIONS
    )
    serializer_class = TaskSerializer
    http_method_names = ["get", "post", "patch", "head", "options"]

    def perform_update(self, serializer):
        task = serializer.instance
        if not can(self.request.user, "change", task):
            raise exceptions.PermissionDenied("Only the job's owner or an admin can change it.")
        start = serializer.validated_data.get("scheduled_start", task.scheduled_start)
        stop = serializer.validated_data.get("scheduled_stop", task.scheduled_stop)
        if serializer.validated_data.get("scheduled_start") and task.job.owner != self.request.user:
            # A scheduled start runs as the owner: only they decide it (admins may clear it).
            raise exceptions.PermissionDenied(
                "Only the job's owner may schedule a start: the task would run as them."
            )
        if "scheduled_start" in serializer.validated_data and task.status != Task.Status.PENDING:
            raise exceptions.ValidationError(
                {"detail": "Only a pending task can be scheduled to start."}
            )
        if start and stop and stop <= start:
            raise exceptions.ValidationError(
                {"detail": "The scheduled stop must come after the start."}
            )
        serializer.instance = save_schedule(task, serializer.validated_data)

    @extend_schema(responses={202: TaskSerializer})
    @action(detail=True, methods=["post"], serializer_class=ActionSerializer)
    def act(self, request, pk=None):
        """{"action": spawn|interrupt|terminate|kill|stop} on this task; answered at once
        (202, the task "starting" or "stopping"), carried out by the workers."""
        data = _input(request, ActionSerializer)
        task = actions.request(self.get_object(), request.user, data["action"])
        task = self.get_queryset().get(pk=task.pk)
        return Response(TaskSerializer(task).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={202: ACTION_RESULTS})
    @action(detail=False, methods=["post"], serializer_class=ActionSerializer, url_path="bulk")
    def bulk(self, request):
        """{"action", "tasks": [ids], "jobs": [ids]}: the action on all of them it fits;
        answered at once (202), carried out by the workers."""
        data = _input(request, ActionSerializer)
        visible = self.get_queryset()
        chosen = visible.filter(pk__in=data["tasks"]) | visible.filter(job__in=data["jobs"])
        return _results(actions.request_all(list(chosen.distinct()), request.user, data["action"]))

    @extend_schema(
        parameters=[OpenApiParameter("offset", int, description="First byte to return.")],
        responses=LOG_PIECE,
    )
    @action(detail=True, methods=["get"])
    def log(self, request, pk=None):
        """{"size", "offset", "next_offset", "text", ...} from ?offset= (bytes); poll to
        follow. The log as the workers last fetched it (after each monitoring cycle while
        the task runs); ``size`` is how far that goes; the task's status and exit code now."""
        offset = _int(request.query_params.get("offset") or "0", "offset")  # empty: absent
        task = self.get_object()
        piece = actions.log_piece(task, offset)
        return Response({**piece, "status": task.status, "exit_code": task.exit_code})

    @extend_schema(responses={(200, "text/plain"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        """The whole log as a text file."""
        return log_download(self.get_object())


@transaction.atomic
def save_schedule(task: Task, changes: dict) -> Task:
    """Write only the scheduled times, on the row locked, and only if the task's status is
    still the one the checks saw: a save of the whole row would put back a status the
    workers changed meanwhile (a running task shown pending again)."""
    stored = Task.objects.select_for_update().get(pk=task.pk)
    if stored.status != task.status:
        raise Conflict(
            f"Task {task.pk} changed meanwhile (it is {stored.get_status_display().lower()} "
            "now); nothing was changed."
        )
    for field, value in changes.items():
        setattr(task, field, value)
    task.save(update_fields=list(changes))
    return task


def _int(value: str, name: str) -> int:
    if not is_whole_number(value):
        raise exceptions.ValidationError(
            {
                name: ["Must be a whole number of bytes."],
                "detail": f"{name} must be a whole number.",
            }
        )
    return int(value)


def log_download(task: Task) -> HttpResponse:
    """The log as kept by the service, as a text file (ValidationError before it started).
    The workers keep a bounded tail of each log, so the answer is bounded too."""
    response = HttpResponse(actions.log_file(task), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{task.session_name}.log"'
    return response
