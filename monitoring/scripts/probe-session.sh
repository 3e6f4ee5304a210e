# shellcheck shell=sh
# `sh -c SESSION_SCRIPT probe-session TIMEOUT PATH...`: a probe session (monitoring/sessions.py).
# It answers each line it reads ("1" asks for versions too) with one sample (see sample.sh),
# written at once (one SSH packet) and closed by "@@end" (monitoring.probes.SESSION_END). CPU
# utilisation is measured between two consecutive samples, so no sample sleeps; the first one
# measures over 0.2 s. Samples asked back to back (a "probe now" right after a sample; a fast
# sample on an idle host) can read /proc/stat twice within one clock tick, which tells nothing
# (0 ticks, no utilisation): then, and only then, it waits for the next tick, in 10 ms steps
# up to 0.2 s. It ends when its standard input closes (the service went away). Its errors are
# dropped, as the one-shot probe's are, so the service never waits on them.
. ./sample.sh
exec 2>/dev/null
T="$1"; shift
hive_cpuinfo=$(cpuinfo)
read -r prev < /proc/stat; sleep 0.2
while read -r V; do
  if [ "$V" = 1 ]; then hive_cpuinfo=$(cpuinfo); fi
  out=$(sample "$V" "$T" "$@"); read -r now < /proc/stat; i=0
  while [ "$now" = "$prev" ] && [ $i -lt 20 ]; do
    sleep 0.01; read -r now < /proc/stat; i=$((i+1))
  done
  printf '%s\n@@stat\n%s\n%s\n@@end\n' "$out" "$prev" "$now"
  prev=$now
done
