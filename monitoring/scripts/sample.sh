# shellcheck shell=sh
# Included by probe.sh and probe-session.sh: `sample VERSIONS TIMEOUT PATH...`, the body of
# every probe. No values are pasted in: whether to ask for versions arrives as 1 or 0, the
# timeout and the disk paths to measure as arguments; the fields asked of nvidia-smi are
# $gpu_fields (else $old_gpu_fields: drivers before R450 refuse the MIG mode field) and
# $app_fields, which monitoring/probes.py assigns before the script from
# monitoring/parsers.py, where the answers are read by them; the "@@gpus" line names the
# fields the answer has. Sections start with "@@".
# Only where a GPU is in MIG mode, `nvidia-smi -L` (the slices' profiles and UUIDs) and
# `nvidia-smi -q` (their memory, and which slice each process runs on) are asked too.
# `timeout -k` kills a hung nvidia-smi on the host itself, so no zombie query piles up.
# Driver and CUDA versions come from `nvidia-smi --version` (drivers since about R525), else
# from the header of `-q -d COMPUTE` (older drivers refuse --version; the COMPUTE section
# keeps that report short); being a third nvidia-smi run, only when asked. CPU utilisation
# is not measured here: each caller prints two /proc/stat lines as the "@@stat" section.
#
# It runs on the lab's GPU servers every interval, beside their users' work, so it starts
# only the programs that do the measuring (nvidia-smi under timeout, ps, df): the GPU
# processes' pids, memory and the last df line are read with the shell's own `read`, `case`
# and parameter expansions, not grep, awk, paste, tail or head (from 15 programs a sample to
# 7; bench/probe_host_cost.py). The CPU count and model (2 greps over /proc/cpuinfo) come
# from $hive_cpuinfo when the caller read them already: the session reads them at its start
# and again when versions are asked (after a host was down, on "probe now").
# Which containers the GPU processes run in ("@@cgroups", "@@containers", "@@passwd").
. ./containers.sh
cpuinfo() {
grep -c '^processor' /proc/cpuinfo
grep -m1 -E '^(model name|Hardware|Processor|cpu model)[[:space:]]*:' /proc/cpuinfo
}
# shellcheck disable=SC2154  # $*_fields: assigned before the script (see above)
sample() {
V="$1"; T="$2"; shift 2
gf=$gpu_fields
gq=$(timeout -k 2 "$T" nvidia-smi --query-gpu="$gf" --format=csv,noheader,nounits 2>&1); grc=$?
case $gq in *'is not a valid field to query'*)
  gf=$old_gpu_fields
  gq=$(timeout -k 2 "$T" nvidia-smi --query-gpu="$gf" --format=csv,noheader,nounits 2>&1); grc=$?
esac
echo "@@gpus $grc $gf"; printf '%s\n' "$gq"
if [ "$grc" -eq 0 ]; then
  aq=$(timeout -k 2 "$T" nvidia-smi --query-compute-apps="$app_fields" \
--format=csv,noheader,nounits 2>&1); arc=$?
  echo "@@apps $arc"; printf '%s\n' "$aq"
  # The second field of each line, where it is a number: the pids to look up.
  pids=; ifs=$IFS; IFS='
'; set -f
  for line in $aq; do
    pid=${line#*,}; pid=${pid#"${pid%%[! ]*}"}; pid=${pid%%,*}
    case $pid in ''|*[!0-9]*) ;; *) pids=$pids${pids:+,}$pid ;; esac
  done
  IFS=$ifs; set +f
  echo "@@ps"
  # -q reads only these pids (-p reads every process on the host and keeps these: its cost
  # grows with the host's process count); procps before 3.3.7 has no -q, hence -p after.
  if [ -n "$pids" ]; then
    psfmt=pid=,uid=,user:64=,args=
    ps -ww -o "$psfmt" -q "$pids" 2>/dev/null || ps -ww -o "$psfmt" -p "$pids"
  fi
  case $gq in *', Enabled, '*)
    ml=$(timeout -k 2 "$T" nvidia-smi -L 2>/dev/null); echo "@@mig-list $?"; printf '%s\n' "$ml"
    mq=$(timeout -k 2 "$T" nvidia-smi -q 2>/dev/null); echo "@@mig-query $?"; printf '%s\n' "$mq"
  esac
  [ -z "$pids" ] || containers "$pids"
  if [ "$V" = 1 ]; then
    echo "@@driver"
    timeout -k 2 "$T" nvidia-smi --version 2>/dev/null || \
timeout -k 2 "$T" nvidia-smi -q -d COMPUTE 2>/dev/null
  fi
fi
echo "@@meminfo"
while IFS= read -r line; do
  case $line in
    MemTotal:*) printf '%s\n' "$line" ;;
    MemAvailable:*) printf '%s\n' "$line"; break ;;
  esac
done < /proc/meminfo
echo "@@cpuinfo"
if [ -n "$hive_cpuinfo" ]; then printf '%s\n' "$hive_cpuinfo"; else cpuinfo; fi
echo "@@disks"
for p in "$@"; do
  if [ -e "$p" ]; then usage=$(df -P -k -- "$p" 2>/dev/null); printf '%s\n%s\n' "$p" "${usage##*
}"; fi
done
}
