#!/usr/bin/env bash
# Load test: 200 simulated lab members against the production profile on loopback.
#   bench/load/run.sh                      # SQLite (WAL) in data/load/
#   LOAD_DATABASE_URL=postgres://root@127.0.0.1:5432/hive_load bench/load/run.sh
#   LOAD_WEB_PROCESSES=2 bench/load/run.sh # 2 daphnes behind nginx (round robin), as
#                                          # deploy/web-processes.sh runs them; =1: one, same nginx
# Env: LOAD_USERS (200), LOAD_SPAWN_RATE (20/s), LOAD_TIME (3m), LOAD_PORT (8077).
# Prints throughput, p50/p95/p99, error rate, then checks that no GPU was double-booked
# and no confirmed booking was lost. Needs nothing but this checkout and Python 3.11.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
USERS=${LOAD_USERS:-200} RATE=${LOAD_SPAWN_RATE:-20} TIME=${LOAD_TIME:-3m} PORT=${LOAD_PORT:-8077}
WORK=$ROOT/data/load
PY=$ROOT/.venv/bin/python
[ -x "$PY" ] || { echo "run bin/serve or bin/test once first (creates .venv)"; exit 1; }
# locust lives in its own virtualenv: it is a tool, not a dependency of the service.
if [ ! -x "$WORK/venv/bin/locust" ]; then
  python3.11 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install -q -r bench/requirements.txt
fi

rm -rf "$WORK/run" && mkdir -p "$WORK/run"
export HIVE_DATA_DIR=$WORK/run DJANGO_SETTINGS_MODULE=hiveproject.settings
# The production profile as nginx fronts it (see deploy/): https public URL, proxy headers,
# DEBUG off, whitenoise. Cookies are not marked Secure only because the load generator
# talks plain http on loopback and would (rightly) not send Secure cookies back.
export PUBLIC_URL=https://gpus.lab.example ALLOWED_HOSTS=gpus.lab.example HIVE_BEHIND_PROXY=1
export SESSION_COOKIE_SECURE=0 CSRF_COOKIE_SECURE=0 DEBUG=0 LOG_LEVEL=WARNING
unset REDIS_URL
if [ -n "${LOAD_DATABASE_URL:-}" ]; then
  export DATABASE_URL=$LOAD_DATABASE_URL
  dbname=${DATABASE_URL##*/}
  psql "${DATABASE_URL%/*}/postgres" -qc "DROP DATABASE IF EXISTS \"$dbname\"" \
    -c "CREATE DATABASE \"$dbname\"" >/dev/null
else
  unset DATABASE_URL
fi
echo "== database: ${DATABASE_URL:-SQLite in $WORK/run}"
"$PY" manage.py migrate -v0
"$PY" manage.py collectstatic --noinput -v0
"$PY" bench/load/setup_load.py "$WORK/run/sessions.json" "$USERS"

WEB=()
trap 'kill "${WEB[@]}" 2>/dev/null || true' EXIT
if [ -z "${LOAD_WEB_PROCESSES:-}" ]; then  # one daphne, no proxy (the figures before nginx)
  "$PY" -m daphne -b 127.0.0.1 -p "$PORT" hiveproject.asgi:application >"$WORK/run/daphne.log" 2>&1 &
  WEB+=($!)
else  # LOAD_WEB_PROCESSES daphnes on PORT+1.. behind nginx on PORT (plain http, loopback)
  mkdir -p "$WORK/run/nginx"
  upstream=""
  for ((i = 1; i <= LOAD_WEB_PROCESSES; i++)); do
    "$PY" -m daphne -b 127.0.0.1 -p $((PORT + i)) hiveproject.asgi:application \
      >"$WORK/run/daphne-$i.log" 2>&1 &
    WEB+=($!)
    upstream+="server 127.0.0.1:$((PORT + i)); "
  done
  # The committed site's proxying (deploy/nginx/gpuhive.conf) without TLS: the generator sends
  # X-Forwarded-Proto itself, and nginx passes it on.
  cat >"$WORK/run/nginx/nginx.conf" <<CONF
$( [ "$(id -u)" = 0 ] && echo "user root;" )
worker_processes 1;
pid $WORK/run/nginx/nginx.pid;
error_log $WORK/run/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $WORK/run/nginx/body; proxy_temp_path $WORK/run/nginx/proxy;
  fastcgi_temp_path $WORK/run/nginx/fcgi; uwsgi_temp_path $WORK/run/nginx/uwsgi;
  scgi_temp_path $WORK/run/nginx/scgi;
  upstream gpuhive { $upstream}
  server {
    listen 127.0.0.1:$PORT;
    location / {
      proxy_pass http://gpuhive; proxy_http_version 1.1;
      proxy_set_header Host \$host; proxy_read_timeout 120s;
    }
  }
}
CONF
  nginx -p "$WORK/run/nginx/" -c "$WORK/run/nginx/nginx.conf" -g "daemon off;" &
  WEB+=($!)
  for ((i = 1; i <= LOAD_WEB_PROCESSES; i++)); do
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$((PORT + i))/" && break; sleep 0.2; done
  done
fi
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.2; done

echo "== locust: $USERS users, spawn $RATE/s, $TIME on $(nproc) cores (load generator on the same machine), web processes: ${LOAD_WEB_PROCESSES:-1 (no proxy)}"
LOAD_SESSIONS=$WORK/run/sessions.json LOAD_JOURNAL=$WORK/run/journal.jsonl \
LOAD_PUBLIC_HOST=gpus.lab.example \
  "$WORK/venv/bin/locust" -f bench/load/locustfile.py --headless -u "$USERS" -r "$RATE" \
  -t "$TIME" --host "http://127.0.0.1:$PORT" --csv "$WORK/run/stats" --only-summary \
  >"$WORK/run/locust.log" 2>&1 || true
# After a heavy run daphne has been seen to hang in shutdown (threads parked): give it 15 s.
kill "${WEB[@]}"
for pid in "${WEB[@]}"; do
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
done

echo "== results"
"$PY" bench/load/summarise.py "$WORK/run/stats_stats.csv"
echo "== invariants"
"$PY" bench/load/check_invariants.py "$WORK/run/journal.jsonl"
