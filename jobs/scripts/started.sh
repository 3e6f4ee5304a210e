# shellcheck shell=sh
# `sh -c STARTED sh LOGDIR NAME`: a task's pid and log path after its starter died, "PID
# LOGPATH" as spawn.sh prints them, with no PID if the window never started (spawn.sh removes
# an old pid file before starting it).
. ./resolve-dir.sh
name=$2
printf "%s %s\n" "$(cat "$dir/$name.pid" 2>/dev/null)" "$dir/$name.log"
