# shellcheck shell=sh
# `sh -c SPAWN WINDOW LOGDIR NAME COMMAND [NAME=VALUE...]`: start window.sh ($0) detached in
# a screen session NAME, running COMMAND with those variables in its environment; wait (up to
# about 5 s, in 1 ms steps: the pid comes within a few, and short commands queued by gpurun
# pay this wait on every start) for its pid, and print "PID LOGPATH".
#
# A second session of the same name is refused; screen is asked only when an earlier window
# of that name may still run (its pid file names a live process): asking it costs more than
# the rest of the start (it probes every session of the account), and a name is started
# again only when an interrupted start is retried (and only then are files of an earlier
# window there to remove: `rm` runs only for those). The environment is exported by a
# subshell that then becomes screen (one exec fewer than `env`; `export` alone would list the
# environment, hence the test); the names were checked when the task was made
# (jobs.templating.check_env), and a bad one ends the subshell, a special built-in's error.
# The FIFO a waiter sleeps on is made by its first wait (wait-exit.sh), while the command
# runs: `mkfifo` here cost every start a process before the command could begin, and a task
# nobody waits for needs none.
. ./resolve-dir.sh
name=$2 cmd=$3
shift 3
[ -d "$dir" ] || mkdir -p "$dir" || exit 3
old=
read -r old 2>/dev/null <"$dir/$name.pid"
if [ -n "$old" ] && kill -0 "$old" 2>/dev/null &&
  screen -ls 2>/dev/null | grep -q "[.]${name}[[:space:]]"; then
  echo "a screen session named $name is already running" >&2
  exit 4
fi
for f in "$dir/$name.exit" "$dir/$name.pid" "$dir/$name.done"; do
  if [ -e "$f" ] || [ -h "$f" ]; then rm -f "$f"; fi
done
: >"$dir/$name.log" || exit 3
(
  # shellcheck disable=SC2163  # the arguments are NAME=VALUE: they export themselves
  [ $# -eq 0 ] || export "$@"
  exec screen -dmS "$name" sh -c "$0" sh \
    "$dir/$name.log" "$dir/$name.exit" "$dir/$name.pid" "$cmd" "$dir/$name.done"
) || exit 5
i=0
while [ ! -s "$dir/$name.pid" ] && [ $i -lt 5000 ]; do
  sleep 0.001
  i=$((i + 1))
done
pid=
read -r pid 2>/dev/null <"$dir/$name.pid"
printf "%s %s\n" "$pid" "$dir/$name.log"
