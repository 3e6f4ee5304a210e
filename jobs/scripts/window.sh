# shellcheck shell=sh
# The screen window's shell, started by spawn.sh as
# `sh -c WINDOW sh LOGFILE EXITFILE PIDFILE COMMAND DONEFIFO`.
#
# It traps INT and TERM with a no-op (children still get the default actions), so it
# outlives the command and writes its exit code even when the command is interrupted. The
# command runs in a shell that, on those signals, exits only once its foreground program has
# (with that program's status): a program that ignores SIGTERM keeps the task running until
# it is killed, instead of looking ended. A `tail -f` shows the log to whoever attaches with
# `screen -x`; being an asynchronous command of a non-interactive shell it ignores SIGINT.
# The window's processes are its process group (the shell leads it; signal.sh stops a task
# by it), and none outlives the window:
# - when the command ends, the shell, once the exit file and the FIFO line are out, sends
#   SIGHUP to its group (itself excepted): the tail, and whatever the command left running
#   in the background, end as at the close of a terminal. The kernel would do so too when
#   the shell, the session's leader, exits, but only to the terminal's foreground group of
#   that moment, which a command may have changed;
# - when the terminal goes away first (`screen -X quit`, screen killed) or someone sends
#   SIGHUP to the shell, the shell ends at once, as a login shell would (a trapped signal
#   would wait for the foreground command: a `sleep 300` would keep the window for 5
#   minutes), with no exit code (a sync reports the session ended without one), and the
#   kernel sends SIGHUP to the group of the hung-up terminal.
# Neither shell traps SIGHUP: a process the command forks inherits its shell's traps until
# it resets them, so a SIGHUP sent just then (a command that ends right after starting
# something in the background) would be lost.
#
# So the window closes with its command, with no process of its own after the end (a
# lingering `sleep` would run just as the next start begins); the log stays in its file and
# on the page. Once the exit file is in place, a line into the task's FIFO, if a waiter made
# one (opened read-write, so it never blocks), wakes whoever waits there (wait-exit.sh).
# Between the command's end and that line only shell built-ins run (the exit file is written
# by printf, its time is its mtime): a process started there would delay every next start of
# gpurun and the queue by its fork and exec, a few ms on a loaded host. The file is a few
# bytes in one write; a reader who comes between its creation and that write finds it empty
# and takes it as not there yet.
log=$1 exitf=$2 pidf=$3 cmd=$4 donef=$5
trap : INT TERM
echo $$ >"$pidf"
tail -n +1 -f "$log" 2>/dev/null &
sh -c 'trap exit INT TERM; eval "$1"' sh "$cmd" >>"$log" 2>&1
code=$?
printf "%s\n" "$code" >"$exitf"
if [ -p "$donef" ]; then echo 1<>"$donef"; fi
trap "" HUP
kill -s HUP 0
exit "$code"
