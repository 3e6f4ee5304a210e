#!/usr/bin/env bash
# Upgrade a machine to the code checked out in /opt/gpuhive (git pull or a new release).
#   cd /opt/gpuhive && git pull && sudo deploy/upgrade.sh
# Back up first (deploy/backup.sh). Migrations run once, from whichever machine upgrades
# first; on the others `migrate` finds nothing left to do. Upgrade every machine: web and
# workers must run the same code.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV_FILE=${HIVE_ENV_FILE:-/etc/gpuhive/hive.env}
# Run as the service user with the service's settings (the env file is readable by it).
run() { sudo -u gpuhive bash -c 'set -a; . "$0"; set +a; exec "$@"' "$ENV_FILE" "$@"; }
.venv/bin/pip install -q -r requirements.txt   # the code and its venv belong to root
run .venv/bin/python manage.py migrate --no-input
run .venv/bin/python manage.py collectstatic --no-input -v0
run .venv/bin/python manage.py check --deploy --fail-level WARNING
# Web processes one at a time: nginx sends requests to the others meanwhile.
for unit in $(systemctl list-units --plain --no-legend 'gpuhive-web@*.service' | awk '{print $1}'); do
  systemctl restart "$unit"
done
if systemctl is-enabled --quiet gpuhive-workers 2>/dev/null; then systemctl restart gpuhive-workers; fi
echo "upgraded to $(git describe --always --dirty 2>/dev/null || echo 'this checkout')"
