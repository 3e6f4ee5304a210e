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
UNITS=/etc/systemd/system
# Units a release renamed: the old name goes, so it cannot keep serving old code beside the
# new workers. gpuhive-web.service (one process on port 8000) became gpuhive-web@PORT.
RENAMED_WEB_UNITS=(gpuhive-web.service)

# This checkout's units, on a machine that runs ours (changed ones copied, systemd reloaded);
# a renamed web unit is stopped, disabled and removed, and its successors started in its
# place by deploy/web-processes.sh (WEB_PROCESSES from WEB_PORT, 1 from 8000 by default).
install_units() {
  compgen -G "$UNITS/gpuhive-*.service" >/dev/null || return 0  # no systemd install here
  local file old serving=0
  for file in deploy/systemd/*.service; do
    cmp -s "$file" "$UNITS/$(basename "$file")" || install -m 0644 "$file" "$UNITS/"
  done
  for old in "${RENAMED_WEB_UNITS[@]}"; do
    [[ -e $UNITS/$old ]] || continue
    if systemctl is-enabled --quiet "$old" || systemctl is-active --quiet "$old"; then
      serving=1
    fi
    systemctl disable --now "$old" || true
    rm -f "$UNITS/$old"
    echo "removed the renamed unit $old"
  done
  systemctl daemon-reload
  if ((serving)); then deploy/web-processes.sh; fi
  if [[ -e /etc/nginx/sites-enabled/gpuhive.conf ]] &&
    ! grep -q gpuhive-upstream.conf /etc/nginx/sites-enabled/gpuhive.conf; then
    echo "note: nginx's gpuhive site does not include /etc/nginx/gpuhive-upstream.conf;" \
      "install deploy/nginx/gpuhive.conf (keep your TLS lines) to use every web process" >&2
  fi
}

# The runtime's lock: every package pinned, each file checked against its hash. The code and
# its venv belong to root.
.venv/bin/pip install -q --require-hashes -r requirements.txt
# Sign-in with the lab's directory, where the env file turns it on: the directory's own lock
# (python-ldap builds from source, against the headers docs/operating.md names).
if bash -c 'set -a; . "$0"; [[ -n ${HIVE_LDAP_SERVER_URI:-} ]]' "$ENV_FILE"; then
  .venv/bin/pip install -q --require-hashes -r requirements-directory.txt || {
    echo "requirements-directory.txt did not install: python-ldap builds against" \
      "build-essential libldap2-dev libsasl2-dev (apt-get install them)" >&2
    exit 1
  }
fi
run .venv/bin/python manage.py migrate --no-input
# What the migrations could not decide alone (e.g. an account they left empty): warnings only.
run .venv/bin/python manage.py check --database default --tag upgrade
run .venv/bin/python manage.py collectstatic --no-input -v0
run .venv/bin/python manage.py check --deploy --fail-level WARNING
install_units
# Web processes one at a time: nginx sends requests to the others meanwhile.
for unit in $(systemctl list-units --plain --no-legend 'gpuhive-web@*.service' | awk '{print $1}'); do
  systemctl restart "$unit"
done
if systemctl is-enabled --quiet gpuhive-workers 2>/dev/null; then systemctl restart gpuhive-workers; fi
echo "upgraded to $(git describe --always --dirty 2>/dev/null || echo 'this checkout')"
