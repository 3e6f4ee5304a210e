# shellcheck shell=sh
# Included by sample.sh: `containers PIDS`, PIDS the GPU processes' pids joined by commas. Which container each runs in, and what its engine says of it, for
# monitoring/containers.py, which reads these sections (what they mean is decided there):
#
# - "@@cgroups": the line "probe", then the probe's own /proc/$$/cgroup (a host that is
#   itself a container: its processes are not "in a container" there), then each pid as a
#   line "pid N" and its /proc/N/cgroup as it is;
# - "@@containers": `docker inspect` and `podman inspect` of the containers seen there, a
#   line "TOOL ID NAME LABELS-JSON" each, asked only when a GPU process runs in one, at
#   most 32 at a time, each tool killed after 3 s (a hung daemon must not hold every
#   sample; monitoring.probes.probe_timeout counts them); a missing tool, a daemon that is
#   down or an id it does not know prints nothing;
# - "@@passwd": `getent passwd` of the uids whose user manager holds a container (rootless
#   Podman or Docker: `.../user@UID.service/...`); those containers belong to that uid, and
#   the probe's account could not inspect them anyway.
#
# A container is any path component that is 64 hex digits once a runtime's prefix and the
# ".scope" suffix are cut ("docker-ID.scope", "libpod-ID.scope", "/docker/ID",
# "...:cri-containerd:ID"); the runtime is told apart in Python. The shell's own `read`,
# `case` and expansions do the reading: no program starts unless a container is seen.
cgroup_lines() {  # cgroup_lines FILE: prints it; adds its containers to $c_ids, $c_uids
c_saved=$IFS; set -f
while IFS= read -r c_line; do
  printf '%s\n' "$c_line"
  c_path=${c_line#*:*:}; c_id=; IFS=/
  for c_part in $c_path; do
    c_part=${c_part%.scope}; c_part=${c_part##*[-:]}
    if [ "${#c_part}" -eq 64 ]; then
      case $c_part in *[!0-9a-f]*) ;; *) c_id=$c_part ;; esac
    fi
  done
  [ -n "$c_id" ] || continue
  case $c_path in
    */user@*.service/*)
      c_uid=${c_path#*/user@}; c_uid=${c_uid%%.service/*}
      case " $c_uids " in *" $c_uid "*) ;; *) c_uids="$c_uids $c_uid" ;; esac ;;
    *)
      case " $c_ids " in
        *" $c_id "*) ;;
        *) [ "${c_count:-0}" -ge 32 ] || { c_ids="$c_ids $c_id"; c_count=$((${c_count:-0} + 1)); } ;;
      esac ;;
  esac
done 2>/dev/null < "$1"
IFS=$c_saved; set +f
}
inspect_containers() {  # the @@containers and @@passwd sections
echo "@@containers"
if [ -n "$c_ids" ]; then
  for c_tool in docker podman; do
    command -v "$c_tool" >/dev/null 2>&1 || continue
    # shellcheck disable=SC2086  # $c_ids: hex ids, one argument each
    timeout -k 1 3 "$c_tool" inspect --type container \
--format "$c_tool {{.Id}} {{.Name}} {{json .Config.Labels}}" $c_ids 2>/dev/null
  done
fi
echo "@@passwd"
# shellcheck disable=SC2086  # $c_uids: numbers, one argument each
if [ -n "$c_uids" ]; then getent passwd $c_uids 2>/dev/null; fi
}
containers() {  # containers PIDS
c_ids=; c_uids=; c_count=0; c_ifs=$IFS; IFS=,
echo "@@cgroups"
echo "probe"
while IFS= read -r c_line; do printf '%s\n' "$c_line"; done 2>/dev/null < "/proc/$$/cgroup"
for c_pid in $1; do
  echo "pid $c_pid"
  cgroup_lines "/proc/$c_pid/cgroup"
done
IFS=$c_ifs
inspect_containers
}
