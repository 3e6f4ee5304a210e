import json as jsonlib
import logging

from django.core.management.base import BaseCommand, CommandError

from monitoring.containers import owner_text
from monitoring.inventory import probe_and_record
from monitoring.loop import probe_once_now
from monitoring.models import Host


def format_table(headers: list[str], rows: list[list]) -> str:
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


class Command(BaseCommand):
    help = (
        "Probe one host once (GPUs, GPU processes, CPU, RAM), record it, and print it. "
        "Exit status: 0 when the host answered, 1 when it is unreachable or unknown (one "
        "line on stderr: 'HOST: unreachable: REASON'). With --all instead of a host: one "
        "cycle of the probing loop over every enabled host, recorded as the loop records it."
    )
    # serve's supervisor runs `probe --all` at start; the checks ran before it (check_apart).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument(
            "host", nargs="?", help="host name as registered (see `manage.py addhost`)"
        )
        parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
        parser.add_argument(
            "--all",
            action="store_true",
            dest="every_host",
            help="one cycle of the probing loop over every enabled host, under the loop's "
            "lease (nothing is done while a running loop holds it)",
        )

    def handle(self, host, json, every_host, **options):
        if every_host == bool(host):
            raise CommandError("name one host, or pass --all")
        if every_host and json:
            raise CommandError("--json prints one host; --all prints what the cycle did")
        if every_host:
            self.stdout.write(probe_once_now())
            return
        target = Host.objects.filter(name=host).first()
        if target is None:
            raise CommandError(f"no host named {host!r}; add it with `manage.py addhost`")
        if options["verbosity"] < 2:  # the audit records a status change: not for this screen
            logging.getLogger("gpuhive.audit").setLevel(logging.WARNING)
        result = probe_and_record(target, force=True)
        if json:
            self.stdout.write(_dumps(result.as_json()))
        elif result.reachable:
            self.stdout.write(self._render(result.as_json()))
        if not result.reachable:
            raise CommandError(f"{host}: unreachable: {result.error}")

    def _render(self, data: dict) -> str:
        cpu = data["cpu"]
        parts = [
            f"{data['host']}: {'reachable' if data['reachable'] else 'UNREACHABLE'}",
            f"CPU {cpu['utilization']}%  "
            f"RAM {cpu['memory_used_mib']}/{cpu['memory_total_mib']} MiB",
        ]
        if data["error"]:
            parts.append(f"note: {data['error']}")
        if data["gpus"]:
            parts.append(
                format_table(
                    ["GPU", "model", "util%", "mem%", "used MiB", "total MiB", "temp C", "power W"],
                    [
                        [
                            g["index"],
                            g["name"],
                            g["utilization_gpu"],
                            g["utilization_memory"],
                            g["memory_used_mib"],
                            g["memory_total_mib"],
                            g["temperature_c"],
                            g["power_w"],
                        ]
                        for g in data["gpus"]
                    ],
                )
            )
        if data["processes"]:
            index = {g["uuid"]: g["index"] for g in data["gpus"]}
            parts.append(
                format_table(
                    ["GPU", "PID", "user", "MiB", "command"],
                    [
                        [
                            index.get(p["gpu_uuid"], p["gpu_uuid"]),
                            p["pid"],
                            owner_text(p),
                            p["memory_mib"],
                            p["command"],
                        ]
                        for p in data["processes"]
                    ],
                )
            )
        return "\n".join(parts)


def _dumps(data) -> str:
    return jsonlib.dumps(data, indent=2)
