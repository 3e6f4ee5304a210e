"""The `hive` command: see the lab, book GPUs and cancel, run jobs, from the terminal."""

import getpass
import platform
import secrets
import sys
from datetime import timedelta

import click

from . import config, jobcommands, lab, render
from .api import Api, HiveError
from .session import connect, print_json, whoami
from .when import BadTime, now, parse_when


class HiveGroup(click.Group):
    """Turns our errors into one clear line on stderr and exit status 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (HiveError, BadTime) as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=HiveGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli():
    """GPU Hive from the terminal. Start with `hive login URL`."""


# --- signing in ----------------------------------------------------------------------------


@cli.command()
@click.argument("url")
@click.option("-u", "--username", help="Your user name on GPU Hive (asked if not given).")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--expires-days", type=click.IntRange(min=1), help="The token stops working then.")
def login(url, username, password_stdin, expires_days):
    """Sign in to the GPU Hive at URL and keep a token (never your password)."""
    api = Api(url)
    api.check_server()
    username = username or click.prompt("User name", default=getpass.getuser())
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("Password", hide_input=True)
    body = {"username": username, "password": password, "name": token_name()}
    if expires_days:
        body["expires"] = (now() + timedelta(days=expires_days)).isoformat()
    answer = api.post("tokens/login/", body)
    previous = config.load()
    path = config.save(config.Config(url=api.url, token=answer["token"], username=username))
    revoke_previous(previous, api.url)
    click.echo(f"Signed in to {api.url} as {username}; token {answer['name']!r} kept in {path}.")


def token_name() -> str:
    # Unique per login (names of live tokens must differ), and telling where it was made.
    where = platform.node() or "this computer"
    return f"hive on {where} ({now():%Y-%m-%d %H:%M}, {secrets.token_hex(3)})"


def revoke_previous(previous: config.Config, url: str) -> None:
    """The token this file held before, for the same server, is revoked: one per computer."""
    if not previous.token or previous.url != url:
        return
    try:
        old = Api(previous.url, previous.token)
        for token in old.get("tokens/"):
            if previous.token.startswith(token["prefix"]) and token["state"] == "active":
                old.delete(f"tokens/{token['id']}/")
    except HiveError:
        pass  # expired or revoked already: nothing to clean up


# --- the lab -------------------------------------------------------------------------------


@cli.command()
@click.option("--host", help="Only this host.")
@click.option(
    "--free", is_flag=True, help="Only GPUs you may start on now (the server's start rule)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def status(host, free, as_json):
    """Every GPU: use, memory, who runs what, who booked it until when."""
    api, settings = connect()
    me = whoami(api, settings)
    gpus = lab.gpus(api, host or "")
    if free:
        gpus = [g for g in gpus if g.usable]
    if as_json:
        print_json([g.as_dict() for g in gpus])
        return
    if not gpus:
        click.echo("No free GPUs." if free else "No GPUs.")
        return
    headers = ["GPU", "MODEL", "STATE", "UTIL", "MEMORY", "TEMP", "USERS", "RESERVED"]
    click.echo(render.table(headers, [gpu_row(g, me) for g in gpus]))


def gpu_row(gpu: lab.Gpu, me: str) -> list[str]:
    latest = gpu.latest or {}
    temperature = latest.get("temperature_c")
    return [
        gpu.name,
        gpu.model,
        gpu_state(gpu, me),
        render.percent(latest.get("utilization_gpu")),
        render.memory(latest.get("memory_used_mib"), gpu.memory_total_mib),
        "-" if temperature is None else f"{temperature}°C",
        " ".join(process_label(p) for p in gpu.processes) or "-",
        booking_label(gpu, me),
    ]


def gpu_state(gpu: lab.Gpu, me: str) -> str:
    if not gpu.present:
        return render.paint("lost", fg="red")
    if gpu.latest is None:
        return render.paint(gpu.host_status if gpu.host_status != "up" else "no data", fg="red")
    if gpu.processes:
        return render.paint("busy", fg="yellow")
    if gpu.reservation and gpu.reservation["owner"] != me:
        return render.paint("reserved", fg="yellow")
    if not gpu.usable:  # e.g. "no grant", "held by task": the start rule's first reason
        code = gpu.reasons[0]["code"] if gpu.reasons else "not usable"
        return render.paint(code.replace("_", " "), fg="yellow")
    return render.paint("free", fg="green")


def process_label(process: dict) -> str:
    memory = process.get("memory_mib")
    user = process.get("user") or "?"
    return f"{user}({memory}M)" if memory is not None else user


def booking_label(gpu: lab.Gpu, me: str) -> str:
    if gpu.reservation:
        r = gpu.reservation
        text = f"{r['owner']} until {render.when(r['end'])}"
        return render.paint(text, fg="cyan" if r["owner"] == me else "yellow")
    if gpu.next_reservation:
        r = gpu.next_reservation
        return f"next: {r['owner']} {render.when(r['start'])}-{render.when(r['end'])}"
    return "-"


# --- reservations --------------------------------------------------------------------------


@cli.command()
@click.option("-g", "--gpus", multiple=True, required=True, help="e.g. node-1:0,1 (repeatable).")
@click.option("--from", "start", required=True, help='e.g. "tomorrow 9:00", "now", ISO 8601.')
@click.option("--to", "end", required=True, help='e.g. "17:00" (the start\'s day), "+2h".')
@click.option("-t", "--title", required=True, help="What the GPUs are for.")
@click.option("-d", "--description", default="", help="More words, if useful.")
@click.option("--json", "as_json", is_flag=True, help="Print the reservation as JSON.")
def reserve(gpus, start, end, title, description, as_json):
    """Book GPUs for yourself over a period (times in this computer's zone)."""
    api, _ = connect()
    start_at = parse_when(start)
    end_at = parse_when(end, base=start_at)
    devices = lab.resolve_gpus(api, gpus)
    body = {
        "title": title,
        "description": description,
        "devices": [d["id"] for d in devices],
        "start": start_at.isoformat(),
        "end": end_at.isoformat(),
    }
    booking = api.post("reservations/", body)
    if as_json:
        print_json(booking)
        return
    names = ", ".join(f"{d['host']}:{lab.label(d)}" for d in devices)
    pending = " (awaiting an admin's approval)" if booking["status"] == "pending" else ""
    click.echo(
        f"Reserved #{booking['id']} {title!r}: {names}, "
        f"{render.when(booking['start'])} to {render.when(booking['end'])}{pending}."
    )


@cli.command()
@click.option("--mine", is_flag=True, help="Only your own.")
@click.option("--host", help="Only those on this host.")
@click.option("--all", "everything", is_flag=True, help="Past and cancelled ones too.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def reservations(mine, host, everything, as_json):
    """Current and coming reservations (all users' unless --mine)."""
    api, settings = connect()
    query = {"host": host, "start": None if everything else now().isoformat()}
    if mine:
        query["user"] = whoami(api, settings)
    found = api.get("reservations/", **query)
    if not everything:
        found = [r for r in found if r["status"] != "cancelled"]
    if as_json:
        print_json(found)
        return
    if not found:
        click.echo("No reservations.")
        return
    names = lab.device_names(api)
    rows = [
        [
            str(r["id"]),
            r["title"],
            r["owner"],
            ",".join(names.get(d, str(d)) for d in r["devices"]),
            render.when(r["start"]),
            render.when(r["end"]),
            render.status_word(r["status"]),
        ]
        for r in found
    ]
    click.echo(render.table(["ID", "TITLE", "OWNER", "GPUS", "FROM", "TO", "STATUS"], rows))


@cli.command()
@click.argument("ids", nargs=-1, type=int, required=True)
def cancel(ids):
    """Cancel reservations by ID (one that has started ends now)."""
    api, _ = connect()
    for booking_id in ids:
        booking = api.get(f"reservations/{booking_id}/")
        api.delete(f"reservations/{booking_id}/")
        started = parse_when(booking["start"]) <= now()
        click.echo(f"{'Ended' if started else 'Cancelled'} #{booking_id} {booking['title']!r}.")


@cli.command()
@click.argument("ids", nargs=-1, type=int, required=True)
def keep(ids):
    """Keep reservations by ID: their idle GPUs are not given back before they end."""
    api, _ = connect()
    for booking_id in ids:
        notice = api.post("idle-notices/keep/", {"reservation": booking_id})
        click.echo(f"Kept #{booking_id}: {notice['outcome']}")


@cli.command()
@click.option("--by", type=click.Choice(["user", "group", "host"]), default="user")
@click.option("--period", type=click.Choice(["day", "week", "month"]), default="week")
@click.option("--from", "start", help="First day, YYYY-MM-DD (default: 29 days before --to).")
@click.option("--to", "end", help="Last day, YYYY-MM-DD (default: today).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def usage(by, period, start, end, as_json):
    """GPU-hours reserved, unbooked (jobs outside a booking), used and idle, and energy: yours
    (admins: everyone's)."""
    api, _ = connect()
    lines = api.get("usage/", by=by, period=period, start=start, end=end)
    if as_json:
        print_json(lines)
        return
    if not lines:
        click.echo("No use recorded in this period.")
        return
    rows = [
        [
            line["period"],
            line["name"],
            f"{line['reserved_hours']:.1f}",
            f"{line.get('unbooked_hours', 0):.1f}",
            f"{line['used_hours']:.1f}",
            f"{line['idle_hours']:.1f}",
            f"{line['energy_kwh']:.2f}",
            f"{line['co2e_kg']:.2f}",
        ]
        for line in lines
    ]
    headers = [period.upper(), by.upper(), "RESERVED H", "UNBOOKED H", "USED H", "IDLE H"]
    headers += ["KWH", "CO2E KG"]
    click.echo(render.table(headers, rows))


for command in jobcommands.COMMANDS:
    cli.add_command(command)

# Shown at the end of every command's --help; a command with statuses of its own (`logs -f`)
# says them in its own text first.
EXIT_STATUSES = (
    "Exit status: 0 done; 1 an error or a refusal (one line on stderr: unreachable server, "
    "expired token, no permission, the server's reason); 2 a usage error; 130 Ctrl-C. "
    "--json output: the API's objects, fields only ever added (see GPU Hive's docs/using.md)."
)
for command in cli.commands.values():
    command.epilog = EXIT_STATUSES
cli.epilog = EXIT_STATUSES


def main():
    cli(prog_name="hive")
