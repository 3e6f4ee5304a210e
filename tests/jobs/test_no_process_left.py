"""A task leaves no process on its host once it has ended, however it ended: its command
exited (leaving a child in the background, or holding the terminal's foreground), it was
interrupted, terminated or killed, its screen session was quit or killed, or its window
got SIGHUP. Through the test sshd, in real GNU screen sessions; `ps` (/proc) decides."""

import os
import re
import signal
import subprocess
import sys

import pytest

from jobs import services
from jobs.models import Task
from tests.leftovers import processes, running

from .conftest import wait_for
from .test_execution import TICKER, children_of, make_task, synced

# Exits at once, leaving a `sleep` in the background: it ends with the window, as at the
# close of a terminal.
BACKGROUND_CHILD = "sleep 300 & echo started"
# Makes a process group of its own the terminal's foreground, exits, and leaves a `sleep` in
# the background: the kernel's hangup at the window's end then reaches no process of the
# task (only that group, gone), so the window ends its own.
TAKES_THE_TERMINAL = (
    f"{sys.executable} -c 'import os, signal\n"
    "signal.signal(signal.SIGTTOU, signal.SIG_IGN)\n"
    "os.setpgid(0, 0); os.tcsetpgrp(0, os.getpid())'; sleep 300 & echo started"
)


def task_processes(task: Task) -> list[str]:
    """The task's running processes: its window's session (the window's shell leads it),
    and anything else naming its log (the `tail`) or its screen session."""
    marks = (task.log_path, f".{task.screen_session}")
    procs = running(processes().values())
    return [
        str(proc)
        for proc in procs
        if proc.session == task.pid or any(mark in proc.args for mark in marks)
    ]


def screen_pid(session: str) -> int:
    out = subprocess.run(["screen", "-ls"], capture_output=True, text=True).stdout
    return int(re.search(rf"^\s+(\d+)\.{re.escape(session)}\s", out, re.MULTILINE)[1])


def started(runner, node, command: str, **parameters) -> Task:
    task = services.spawn_task(make_task(runner, node, command, **parameters), runner)
    assert task.pid and wait_for(lambda: children_of(task.pid))  # the command runs
    return task


@pytest.mark.parametrize("command", [BACKGROUND_CHILD, TAKES_THE_TERMINAL])
def test_a_task_that_exits_leaves_nothing(runner, node, command):
    task = started(runner, node, command)
    assert wait_for(lambda: synced(task).exit_code == 0), task.error
    assert wait_for(lambda: not task_processes(task)), task_processes(task)


@pytest.mark.parametrize("action", ["interrupt", "terminate", "kill"])
def test_a_stopped_task_leaves_nothing(runner, node, action):
    task = started(runner, node, TICKER, ticks=600, code=0)
    services.signal_task(task, runner, action)
    assert wait_for(lambda: synced(task).status == Task.Status.KILLED)
    assert wait_for(lambda: not task_processes(task)), task_processes(task)


def quit_screen(task: Task) -> None:
    subprocess.run(["screen", "-S", task.screen_session, "-X", "quit"], check=True)


def kill_screen(task: Task) -> None:
    os.kill(screen_pid(task.screen_session), signal.SIGKILL)


def hang_up_window(task: Task) -> None:
    os.kill(task.pid, signal.SIGHUP)


@pytest.mark.parametrize("end", [quit_screen, kill_screen, hang_up_window])
def test_a_task_whose_terminal_went_away_ends_and_leaves_nothing(runner, node, end):
    """The command ends with its terminal, as it would in a terminal of its own: a task
    whose screen session is gone cannot be attached to, nor seen to end."""
    task = started(runner, node, TICKER, ticks=600, code=0)
    end(task)
    assert wait_for(lambda: not task_processes(task)), task_processes(task)
    assert wait_for(lambda: synced(task).status == Task.Status.FAILED)
    assert "without an exit code" in task.error
