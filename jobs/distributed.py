"""Templates for distributed training: one task per host, wired to each other.

- ``torchrun``: ``torchrun --nnodes --node_rank --nproc_per_node --master_addr --master_port``
  followed by the training script and its arguments;
- ``pytorch-env``: the command as given, with ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
  ``WORLD_SIZE`` (and ``LOCAL_RANK=0``) in its environment (one process per task);
- ``tensorflow``: the command with ``TF_CONFIG`` = {"cluster": {"worker": [host:port, ...]},
  "task": {"type": "worker", "index": i}}.

Ports are free ports the hosts themselves report (asked over SSH as the owner, by a worker
when a request creates the job), picked when the job is created; the tasks show the
resulting commands before anything runs.
"""

import json
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from accesscontrol.accounts import check_run_as
from core import workers
from monitoring.models import Device, Host

from .services import TaskSpec

KINDS = {
    "torchrun": "PyTorch (torchrun)",
    "pytorch-env": "PyTorch (MASTER_ADDR/RANK/WORLD_SIZE environment)",
    "tensorflow": "TensorFlow (TF_CONFIG)",
}
TORCHRUN_FLAGS = (
    " --nnodes={nnodes} --node_rank={node_rank} --nproc_per_node={nproc_per_node}"
    " --master_addr={master_addr} --master_port={master_port} "
)


@dataclass
class Node:
    host: Host
    devices: list[Device] = field(default_factory=list)


def ask_free_port(owner, host: Host) -> int:
    """A port the host reports free, asked by a worker when a request needs it."""
    # Runs python3 as the owner's account: the same refusals as a task (no root...).
    username = check_run_as(owner, host).name
    try:
        return workers.ask("jobs.actions.free_port", host.pk, username)
    except workers.NoAnswer as exc:
        raise ValidationError(f"Could not pick a free port: {exc}") from None


def distributed_specs(
    owner,
    kind: str,
    nodes: list[Node],
    command: str,
    parameters: dict | None = None,
    env: dict | None = None,
    launcher: str = "torchrun",
    nproc_per_node: int = 1,
) -> tuple[str, list[TaskSpec]]:
    """(the job's template, one task spec per node); node 0 is the master/chief."""
    if kind not in KINDS:
        raise ValidationError(f"Unknown template {kind!r}: use one of {', '.join(KINDS)}.")
    if not nodes:
        raise ValidationError("A distributed job needs at least one host.")
    if nproc_per_node < 1:
        raise ValidationError("Processes per node must be at least 1.")
    build = {"torchrun": _torchrun, "pytorch-env": _pytorch_env, "tensorflow": _tensorflow}[kind]
    template, per_node = build(owner, nodes, command, launcher.strip(), nproc_per_node)
    specs = [
        TaskSpec(
            host=node.host,
            template=template,
            parameters={**(parameters or {}), **values},
            env={**(env or {}), **extra_env},
            devices=node.devices,
        )
        for node, (values, extra_env) in zip(nodes, per_node, strict=True)
    ]
    return template, specs


def specs_from(owner, data: dict, nodes: list[Node]) -> tuple[str, list[TaskSpec]]:
    """``distributed_specs`` from the cleaned data of the distributed form or of the API."""
    return distributed_specs(
        owner,
        data["kind"],
        nodes,
        data["command"],
        parameters=data["parameters"],
        env=data["env"],
        launcher=data["launcher"],
        nproc_per_node=data["nproc_per_node"],
    )


def _torchrun(owner, nodes, command, launcher, nproc_per_node):
    if not launcher:
        raise ValidationError("Give the torchrun command (e.g. torchrun, or its full path).")
    master = {
        "master_addr": nodes[0].host.address,
        "master_port": ask_free_port(owner, nodes[0].host),
    }
    common = {**master, "nnodes": len(nodes), "nproc_per_node": nproc_per_node}
    template = launcher.replace("{", "{{").replace("}", "}}") + TORCHRUN_FLAGS + command
    return template, [({**common, "node_rank": rank}, {}) for rank in range(len(nodes))]


def _pytorch_env(owner, nodes, command, launcher, nproc_per_node):
    port = str(ask_free_port(owner, nodes[0].host))
    env = {"MASTER_ADDR": nodes[0].host.address, "MASTER_PORT": port, "WORLD_SIZE": str(len(nodes))}
    return command, [
        ({}, {**env, "RANK": str(rank), "LOCAL_RANK": "0"}) for rank in range(len(nodes))
    ]


def _tensorflow(owner, nodes, command, launcher, nproc_per_node):
    workers = [f"{n.host.address}:{ask_free_port(owner, n.host)}" for n in nodes]
    configs = [
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        for index in range(len(nodes))
    ]
    return command, [({}, {"TF_CONFIG": json.dumps(config)}) for config in configs]
