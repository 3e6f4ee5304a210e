# shellcheck shell=sh
# `sh -c WAIT_EXIT sh LOGDIR NAME SECONDS STEPS [THEN...]`: wait (up to SECONDS) for a task's
# exit file and print it: "CODE" when it came during the wait (the waiter knows the time:
# now), else "CODE TIME" as sync.sh tells it. A waiter that wants to know the moment a task
# ends asks once, instead of polling the whole sync.
#
# It holds the task's FIFO open read-write before looking for the file, so the window's line
# (written after the file) is never missed, and it sleeps in the shell's own `read` without
# polling, so no process stands between the window's line and the answer; a timer in the
# background writes a line of its own after SECONDS (killed when the end came first, and its
# `sleep` with it: it waits for the sleep with `wait`, which a trapped signal interrupts, so
# no sleep outlives the call; a line written with no reader left is lost). The first wait
# makes the FIFO; the window, which writes the file before it looks for the FIFO, either
# finds it or wrote the file before it was made, which the waiter then sees in its second
# look. Tasks whose FIFO could not be made are polled every 50 ms, STEPS times. Once the file
# is there, the optional command THEN runs too (what the waiter needs next, without another
# round trip), its output and status after a marker line.
. ./resolve-dir.sh
. ./exit-time.sh
secs=$3 steps=$4 exitf="$dir/$2.exit" donef="$dir/$2.done" before=
if [ -f "$exitf" ]; then
  before=1
elif [ -p "$donef" ] || mkfifo "$donef" 2>/dev/null; then
  exec 3<>"$donef"
  if [ ! -f "$exitf" ]; then
    (trap 'kill $! 2>/dev/null; exit' TERM; sleep "$secs" & wait $!; echo 1<>"$donef") \
      >/dev/null 2>&1 3<&- &
    timer=$!
    read -r _ <&3
    kill "$timer" 2>/dev/null
  fi
  exec 3<&-
else
  i=0
  while [ ! -f "$exitf" ] && [ $i -lt "$steps" ]; do
    sleep 0.05
    i=$((i + 1))
  done
fi
[ -f "$exitf" ] || exit 0
IFS= read -r ended <"$exitf"
if [ -n "$before" ]; then ended="$ended $(ended_at "$exitf")"; fi
printf "%s\n" "$ended"
shift 4
[ $# -gt 0 ] || exit 0
echo "--then--"
"$@"
echo "--then-status $?"
