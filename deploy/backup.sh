#!/usr/bin/env bash
# Back up GPU Hive: the database and the data directory's secrets (SSH key, secret key).
#   deploy/backup.sh /var/backups/gpuhive
# Reads DATABASE_URL and HIVE_DATA_DIR from the environment or /etc/gpuhive/hive.env.
# PostgreSQL: pg_dump's custom format (consistent while the service runs).
# SQLite: sqlite3's online .backup (consistent while the service runs, WAL included).
# The archive holds the service's private SSH key: keep it as safe as the key itself.
set -euo pipefail
DEST=${1:?usage: backup.sh DESTINATION_DIR}
ENV_FILE=${HIVE_ENV_FILE:-/etc/gpuhive/hive.env}
# shellcheck source=/dev/null  # the site's settings (KEY=VALUE lines), not code to check
if [ -r "$ENV_FILE" ]; then set -a; . "$ENV_FILE"; set +a; fi
DATA=${HIVE_DATA_DIR:-./data}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=$DEST/gpuhive-$STAMP
umask 077
mkdir -p "$OUT"
if [ -n "${DATABASE_URL:-}" ]; then
  pg_dump --format=custom --no-owner --file="$OUT/database.pgdump" "$DATABASE_URL"
else
  sqlite3 "$DATA/hive.sqlite3" ".backup '$OUT/hive.sqlite3'"
  [ "$(sqlite3 "$OUT/hive.sqlite3" 'PRAGMA integrity_check')" = ok ]
fi
# Secrets and settings (not staticfiles: collectstatic rebuilds them).
# shellcheck disable=SC2046  # split on purpose: the names are fixed, one word each
tar -C "$DATA" -czf "$OUT/data.tar.gz" --ignore-failed-read \
  $(cd "$DATA" && ls -d ssh secret_key hive.env 2>/dev/null)
echo "$OUT"
