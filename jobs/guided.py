"""The steps of the guided "New job" form that make a job on GPUs: its tasks' values (with
the live preview), where it runs, whether it may start now, and the job itself.

Nothing is decided here. The combinations are templating's, "may this user start here now"
is the start rule (allocation.rule.may_start), "which N GPUs now" is the placement the queue
and `hive submit --gpus N` use (allocation.placing.place), and creating is
jobs.services.create_job. Each step puts its refusal under the form field it concerns.
The page (board.newjob) takes the steps in the form's order, and the queue's own when the
form asks to queue.
"""

from django.core.exceptions import ValidationError

from accesscontrol.accounts import account_for
from allocation import placing
from allocation.placement import Request, check_named_devices
from allocation.rule import may_start
from monitoring.models import Device, Host

from . import services, templating
from .forms import Where
from .models import Job


def under(field_name: str, check, *args):
    """``check(*args)``, its refusal (if any) shown under the form field ``field_name``."""
    try:
        return check(*args)
    except ValidationError as exc:
        raise ValidationError({field_name: exc.messages}) from None


# --- step 3: the values (also the live preview) ---------------------------------------------


def parameter_sets(data: dict) -> list[dict]:
    """One dict of values per task: the grid's combinations (all, or ``samples`` of them
    drawn with ``seed``); no values at all make one task, for a command without {names}."""
    if not data["values"]:
        return [{}]
    return templating.grid(data["values"], data["samples"], data["seed"])


def specs(data: dict, sets: list[dict], host=None, devices=(), **schedule) -> list:
    return [
        services.TaskSpec(
            host=host,
            template=data["template"],
            parameters=values,
            env=data["env"],
            devices=list(devices),
            **schedule,
        )
        for values in sets
    ]


def checked_sets(data: dict) -> list[dict]:
    """The parameter sets, with the first one's command rendered (every task's command has
    the same {names}), so a missing value is said here."""
    sets = under("values", parameter_sets, data)
    under("values", services.preview, specs(data, sets[:1]))
    return sets


def preview(data: dict) -> dict:
    """How many tasks the form makes and their first command lines, built by the code that
    creates them; a refusal under the field that causes it, nothing saved."""
    return services.preview(specs(data, checked_sets(data)))


# --- step 2: where ------------------------------------------------------------------------


def picked(data: dict, user) -> tuple[Host, list[Device]]:
    """The host and GPUs picked on the list (no GPUs: a task without GPUs on the host)."""
    devices = list(data["devices"])
    if devices:
        under("devices", check_named_devices, devices)
    host = data["host"] or (devices[0].host if devices else None)
    if host is None:
        raise ValidationError(
            {"devices": "Tick the GPUs to use, or choose a host for a task without GPUs."}
        )
    under("devices", services.check_spec, user, services.TaskSpec(host, "", devices=devices))
    return host, devices


def placed_now(data: dict, user) -> tuple[Host, list[Device]]:
    """N GPUs the service picks now, as the queue would (best fit), among those the start
    rule lets ``user`` start on; on one host, as a job started now runs."""
    host = data["host"]
    request = Request(
        kind=data["where"],
        count=data["gpu_count"],
        host_id=host.pk if host else None,
        model=data["gpu_model"],
        min_memory_mib=data["min_memory_mib"],
    )
    found = placing.place(user, request)
    if not found.placed:
        raise ValidationError({"where": f"{found_sentence(found)} {WAIT_FOR_THEM}"})
    hosts = {d.host for d in found.devices}
    if len(hosts) > 1:
        raise ValidationError(
            {
                "where": f"No single host has {data['gpu_count']} GPUs you can use now, and a "
                f"job started now runs on one host. {WAIT_FOR_THEM}"
            }
        )
    return hosts.pop(), found.devices


WAIT_FOR_THEM = "Choose 'As soon as the GPUs are free' to wait for them in the queue."


def found_sentence(found: placing.Placement) -> str:
    """The placement's answer and its first three reasons, as one sentence."""
    reasons = list(dict.fromkeys(r.text for r in found.reasons))
    shown = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
    return f"{found.detail.rstrip('.')}{': ' + shown if shown else ''}."


# --- step 4: a start now, and the job made --------------------------------------------------


def check_start_now(data: dict, user, host: Host, devices: list[Device]) -> None:
    """The start rule over the run (until its stop time, else the reservation horizon), as
    the start itself will ask, and an account to run as on the host."""
    reasons = may_start(user, devices, None, data["scheduled_stop"])
    if reasons:
        field_name = "devices" if data["where"] == Where.DEVICES else "where"
        raise ValidationError({field_name: " ".join(r.text + "." for r in reasons)})
    under("host", account_for, user, host)


def create(data: dict, user, sets: list[dict], host: Host, devices: list[Device]) -> Job:
    # The steps before have made every other check create_job makes; the one left is that
    # the stop comes after the start.
    schedule = {key: data[key] for key in ("scheduled_start", "scheduled_stop")}
    return under(
        "scheduled_stop",
        lambda: services.create_job(
            user,
            name=data["name"],
            specs=specs(data, sets, host, devices, **schedule),
            description=data["description"],
            template=data["template"],
        ),
    )
