# shellcheck shell=sh
# `sh -c PROBE_SCRIPT probe VERSIONS TIMEOUT PATH...`: one probe in one round trip (see
# sample.sh), with the CPU utilisation over 0.2 s.
. ./sample.sh
hive_cpuinfo=
read -r s0 < /proc/stat; sleep 0.2; read -r s1 < /proc/stat
sample "$@"
printf '@@stat\n%s\n%s\n' "$s0" "$s1"
