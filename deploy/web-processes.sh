#!/usr/bin/env bash
# Run WEB_PROCESSES web processes on this machine and point nginx at exactly those.
#   sudo deploy/web-processes.sh        (after changing WEB_PROCESSES or WEB_PORT in hive.env)
#   deploy/web-processes.sh --upstream-only   (writes nginx's file only; the tests use it)
# Instance i is gpuhive-web@<WEB_PORT+i>; instances beyond the count are stopped and disabled.
# nginx's `upstream gpuhive` includes the file written here, then nginx reloads.
set -euo pipefail
ENV_FILE=${HIVE_ENV_FILE:-/etc/gpuhive/hive.env}
UPSTREAM_FILE=${HIVE_NGINX_UPSTREAM:-/etc/nginx/gpuhive-upstream.conf}
# In a subshell: only the two values are read from the env file, nothing else leaks in.
# shellcheck source=/dev/null  # the site's settings (KEY=VALUE lines), not code to check
read -r count base < <(set -a; . "$ENV_FILE"; echo "${WEB_PROCESSES:-1} ${WEB_PORT:-8000}")
if ! [[ $count =~ ^[1-9][0-9]*$ && $base =~ ^[1-9][0-9]*$ ]] || ((base + count > 65536)); then
  echo "WEB_PROCESSES must be a count >= 1 and WEB_PORT a port (got '$count', '$base')" >&2
  exit 2
fi
wanted=()
for ((i = 0; i < count; i++)); do wanted+=("gpuhive-web@$((base + i)).service"); done
{
  echo "# Written by deploy/web-processes.sh: WEB_PROCESSES=$count, WEB_PORT=$base."
  for ((i = 0; i < count; i++)); do echo "server 127.0.0.1:$((base + i));"; done
} >"$UPSTREAM_FILE.new"
mv "$UPSTREAM_FILE.new" "$UPSTREAM_FILE"
if [[ ${1:-} == --upstream-only ]]; then exit 0; fi
systemctl enable --now "${wanted[@]}"
# Instances left from a larger count (or another WEB_PORT): nginx stops using them first.
nginx -t && systemctl reload nginx
for unit in $(systemctl list-units --all --plain --no-legend 'gpuhive-web@*.service' | awk '{print $1}'); do
  if [[ " ${wanted[*]} " != *" $unit "* ]]; then systemctl disable --now "$unit"; fi
done
echo "web: ${wanted[*]}"
