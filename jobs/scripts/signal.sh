# shellcheck shell=sh
# `sh -c SIGNAL sh SIGNAL PGID...`: signal every process of each task's group except the
# window's shell itself (so it stays to write the exit code, even after SIGKILL).
sig=$1
shift
for pgid; do
  for p in $(pgrep -g "$pgid"); do
    [ "$p" = "$pgid" ] || kill -s "$sig" "$p" 2>/dev/null
  done
done
true
