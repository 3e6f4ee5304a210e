#!/usr/bin/env bash
# Restore a backup made by backup.sh. Stop the service everywhere first:
#   systemctl stop 'gpuhive-web@*' gpuhive-workers (on every machine)
#   deploy/restore.sh /var/backups/gpuhive/gpuhive-20250101T000000Z
#   deploy/web-processes.sh; systemctl start gpuhive-workers
# PostgreSQL: the dump replaces the objects of the database in DATABASE_URL.
# SQLite: the database file is replaced (the old one is kept next to it as .before-restore).
set -euo pipefail
SRC=${1:?usage: restore.sh BACKUP_DIR}
ENV_FILE=${HIVE_ENV_FILE:-/etc/gpuhive/hive.env}
# shellcheck source=/dev/null  # the site's settings (KEY=VALUE lines), not code to check
if [ -r "$ENV_FILE" ]; then set -a; . "$ENV_FILE"; set +a; fi
DATA=${HIVE_DATA_DIR:-./data}
umask 077
mkdir -p "$DATA"  # a fresh machine has none yet: the SQLite copy goes into it
if [ -n "${DATABASE_URL:-}" ]; then
  pg_restore --clean --if-exists --no-owner --single-transaction \
    --dbname="$DATABASE_URL" "$SRC/database.pgdump"
else
  [ -e "$DATA/hive.sqlite3" ] && mv "$DATA/hive.sqlite3" "$DATA/hive.sqlite3.before-restore"
  rm -f "$DATA/hive.sqlite3-wal" "$DATA/hive.sqlite3-shm"
  sqlite3 "$SRC/hive.sqlite3" ".backup '$DATA/hive.sqlite3'"
fi
tar -C "$DATA" -xzf "$SRC/data.tar.gz"
echo "restored $SRC into ${DATABASE_URL:+the PostgreSQL database and }$DATA"
