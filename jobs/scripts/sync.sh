# shellcheck shell=sh
# `sh -c SYNC sh LOGDIR NAME...`, one call per account per host per sync: the account's
# screen sessions, then each given task's exit file as "NAME CODE TIME" (an earlier
# version's file, "CODE TIME", gives "NAME CODE TIME MTIME": its own time is read first).
. ./resolve-dir.sh
. ./exit-time.sh
shift
screen -ls 2>/dev/null
echo '--exit files--'
for name; do
  exitf="$dir/$name.exit"
  if [ -f "$exitf" ]; then
    ended=
    read -r ended <"$exitf"
    printf "%s %s %s\n" "$name" "$ended" "$(ended_at "$exitf")"
  fi
done
true
