#!/usr/bin/env bash
# Load test: 200 simulated lab members against the production profile on loopback.
#   bench/load/run.sh                      # SQLite (WAL) in data/load/
#   LOAD_DATABASE_URL=postgres://root@127.0.0.1:5432/hive_load bench/load/run.sh
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

"$PY" -m daphne -b 127.0.0.1 -p "$PORT" hiveproject.asgi:application >"$WORK/run/daphne.log" 2>&1 &
WEB=$!
trap 'kill $WEB 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.2; done

echo "== locust: $USERS users, spawn $RATE/s, $TIME on $(nproc) cores (load generator on the same machine)"
LOAD_SESSIONS=$WORK/run/sessions.json LOAD_JOURNAL=$WORK/run/journal.jsonl \
LOAD_PUBLIC_HOST=gpus.lab.example \
  "$WORK/venv/bin/locust" -f bench/load/locustfile.py --headless -u "$USERS" -r "$RATE" \
  -t "$TIME" --host "http://127.0.0.1:$PORT" --csv "$WORK/run/stats" --only-summary \
  >"$WORK/run/locust.log" 2>&1 || true
# After a heavy run daphne has been seen to hang in shutdown (threads parked): give it 15 s.
kill $WEB; for _ in $(seq 30); do kill -0 $WEB 2>/dev/null || break; sleep 0.5; done
kill -9 $WEB 2>/dev/null || true; wait $WEB 2>/dev/null || true

echo "== results"
"$PY" bench/load/summarise.py "$WORK/run/stats_stats.csv"
echo "== invariants"
"$PY" bench/load/check_invariants.py "$WORK/run/journal.jsonl"
