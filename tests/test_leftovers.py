"""The suite's check for processes a test leaves behind (tests/leftovers.py, run after each
test by tests/conftest.py)."""

import subprocess

from tests.leftovers import end, left_behind, ours


def test_it_names_a_child_left_running_and_ends_it():
    before = ours(())
    child = subprocess.Popen(["sleep", "300"])
    try:
        left = left_behind(before, (), grace=0.2)
        assert [proc.pid for proc in left] == [child.pid]
        assert "sleep 300" in str(left[0])
        end(left)
        assert child.wait(timeout=10) == -9
    finally:
        child.kill()
        child.wait()


def test_it_finds_a_process_that_left_the_tree_by_its_mark(tmp_path):
    """A daemon (here: a process whose parent exited) is ours by the mark in its arguments,
    and so are its children."""
    mark = f"{tmp_path}/"
    before = ours((mark,))
    starter = subprocess.run(
        ["sh", "-c", 'sh -c "sleep 300; :" "$1" >/dev/null 2>&1 & echo $!', "sh", f"{mark}x"],
        capture_output=True,
        text=True,
        check=True,
    )
    orphan = int(starter.stdout)
    left = left_behind(before, (mark,), grace=0.2)
    assert orphan in [proc.pid for proc in left]  # and its sleep, which has no mark
    assert sorted(proc.args for proc in left) == [f"sh -c sleep 300; : {mark}x", "sleep 300"]
    end(left)
    assert not left_behind(before, (mark,), grace=5)


def test_it_waits_for_a_process_that_is_ending_and_ignores_zombies():
    before = ours(())
    ending = subprocess.Popen(["sh", "-c", "sleep 0.5"])
    zombie = subprocess.Popen(["true"])
    try:
        assert left_behind(before, (), grace=10) == []  # the zombie is not reaped yet
    finally:
        ending.wait()
        zombie.wait()
