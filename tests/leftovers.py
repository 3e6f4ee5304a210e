"""The processes a test leaves behind: its own descendants, and processes that carry its marks
(the test run's temporary directory in their command line: screen windows, their `tail`, a
database cluster of its own) even where they left its process tree (screen daemonizes).

Used by the autouse check in tests/conftest.py, which fails a test that leaves one running,
and by tests that look for a task's processes."""

import os
import signal
import time
from contextlib import suppress
from dataclasses import dataclass


@dataclass(frozen=True)
class Proc:
    """One process as /proc shows it; ``started`` (clock ticks after boot) tells a pid that
    was reused from the process it named before."""

    pid: int
    ppid: int
    session: int
    state: str
    started: int
    args: str

    def __str__(self) -> str:
        return f"pid {self.pid} (parent {self.ppid}, session {self.session}): {self.args}"


def _read(pid: str) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read().decode(errors="replace")
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            argv = file.read()
    except OSError:  # it ended while we looked
        return None
    # The command name (2nd field) may hold spaces and ")"; the fields after the last ")"
    # are fixed: state, ppid, pgrp, session, ..., starttime (the 20th of them).
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 1 :].split()
    args = argv.replace(b"\0", b" ").decode(errors="replace").strip() or f"[{comm}]"
    return Proc(int(pid), int(fields[1]), int(fields[3]), fields[0], int(fields[19]), args)


def processes() -> dict[int, Proc]:
    """Every process on the machine now, by pid (zombies too: they have ended)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (proc := _read(name)) is not None:
            table[proc.pid] = proc
    return table


def descendants(root: int, table: dict[int, Proc]) -> set[int]:
    """The pids below ``root`` in ``table``'s process tree."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def running(procs) -> list[Proc]:
    """Those still running (a zombie has ended; only its exit status waits to be read)."""
    return [proc for proc in procs if proc.state != "Z"]


def ours(marks: tuple[str, ...]) -> dict[tuple[int, int], Proc]:
    """The running processes of this test process: its descendants, and those whose command
    line holds one of ``marks`` with theirs; keyed by (pid, start time)."""
    table = processes()
    marked = {p.pid for p in table.values() if any(mark in p.args for mark in marks)}
    mine = marked | descendants(os.getpid(), table)
    for pid in marked:
        mine |= descendants(pid, table)
    found = running(table[pid] for pid in mine if pid != os.getpid())
    return {(p.pid, p.started): p for p in found}


# Processes started during a test for a longer-lived fixture, which ends them (a test that
# restarts the session's sshd): (pid, start time).
_kept: set[tuple[int, int]] = set()


def keep(pid: int) -> None:
    """Do not count process ``pid`` as left behind: a fixture of a wider scope ends it."""
    if (proc := _read(str(pid))) is not None:
        _kept.add((proc.pid, proc.started))


# Roots of process trees a session fixture owns whole, children to come included (the
# browser, which starts helper processes when it needs them): (pid, start time).
_kept_trees: set[tuple[int, int]] = set()


def keep_tree(pid: int) -> None:
    """Do not count ``pid`` or any process below it, now or later: a session fixture that
    ends ``pid`` ends them all."""
    if (proc := _read(str(pid))) is not None:
        _kept_trees.add((proc.pid, proc.started))


def in_kept_trees() -> set[int]:
    table = processes()
    spared = set()
    for pid, started in _kept_trees:
        if pid in table and table[pid].started == started:
            spared |= {pid} | descendants(pid, table)
    return spared


def left_behind(
    before: dict[tuple[int, int], Proc], marks: tuple[str, ...], grace: float
) -> list[Proc]:
    """The processes of ours that were not there ``before`` and still run after up to
    ``grace`` seconds (the time a process that was told to end may take to do so); none
    that was kept (``keep``, ``keep_tree``)."""
    deadline = time.monotonic() + grace
    while True:
        spared = in_kept_trees()
        new = [
            p
            for key, p in ours(marks).items()
            if key not in before and key not in _kept and p.pid not in spared
        ]
        if not new or time.monotonic() >= deadline:
            return sorted(new, key=lambda proc: proc.pid)
        time.sleep(0.1)


def end(procs: list[Proc]) -> None:
    """SIGKILL each of ``procs`` that is still the process it was (its pid not reused)."""
    for proc in procs:
        now = _read(str(proc.pid))
        if now is not None and now.started == proc.started:
            with suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
