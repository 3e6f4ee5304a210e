# shellcheck shell=sh
# `sh -c LAUNCHER sh TOKEN MARK SCRIPT...`: a shell kept open as one account on the service's
# own machine that runs what run_as would, one request at a time (jobs.remote.Launcher): a
# call then costs the fork and exec of its own command, instead of setpriv, a shell in the
# account's home and a UID check each.
#
# A request is a line with the number of lines that follow, then the UID floor and the argv,
# an item a line. The answer is the command's output, a line break and "--done-- TOKEN
# STATUS"; its errors go to the shell's stderr. The token is unguessable, so no output is
# taken for the end. The scripts the service sends (spawn.sh, wait-exit.sh, ...) are given
# once, as the arguments after the token and MARK; an item MARK + N stands for the Nth. A
# shell's `read` takes its input a byte at a time (it must not read past the line), so a
# start sending its 2 KB of scripts on every call cost about 2,500 system calls before it
# could begin.
. ./below-floor.sh
token=$1 mark=$2
shift 2
i=0
# shellcheck disable=SC2034  # $s is read by the eval, as its text says
for s; do
  eval "s$i=\$s"
  i=$((i + 1))
done
uid=$(id -u)
while IFS= read -r n; do
  set --
  while [ $# -lt "$n" ]; do
    IFS= read -r item || exit 0
    case $item in
      "$mark"*)
        k=${item#"$mark"}
        case $k in
          "" | *[!0-9]*) ;;
          *) eval "item=\$s$k" ;;
        esac
        ;;
    esac
    set -- "$@" "$item"
  done
  floor=$1
  shift
  if [ "$uid" -lt "$floor" ]; then
    below_floor "$uid" "$floor"
    status=6
  else
    "$@" </dev/null
    status=$?
  fi
  printf "\n--done-- %s %s\n" "$token" "$status"
done
