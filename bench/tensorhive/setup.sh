#!/usr/bin/env bash
# TensorHive 1.1.0 from PyPI, set up for bench/api_side_by_side.py, then its API server.
#
#   bench/tensorhive/setup.sh VENV THHOME PORT [ORIGIN]
#
# VENV    its virtualenv (Python 3.11), made and filled if it has no tensorhive yet; keep it
#         outside the repository (e.g. /tmp/tensorhive-venv): it is not GPU Hive's
# THHOME  an empty folder: TensorHive's HOME, so its config (~/.config/TensorHive) and
#         SQLite database are the benchmark's own
# PORT    the API server's port on 127.0.0.1 (TensorHive's API: http://127.0.0.1:PORT/api)
# ORIGIN  the first booking's start, naive UTC ISO (default: 8 days ago, on the hour)
#
# It writes the config, fills the database with bench/tensorhive/dataset.py's rows
# (populate.py) and then runs the API server in the foreground (Ctrl-C stops it): the one
# TensorHive's `tensorhive` command starts (connexion on gevent's WSGI server, one process),
# without the monitoring, protection and web-app services, which need SSH hosts and serve
# no API request. Needs python3.11, a C compiler and PyPI.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,18p "$0"; exit 2; }
VENV=$1 THHOME=$2 PORT=$3
ORIGIN=${4:-$(python3.11 -c 'from datetime import datetime, timedelta, timezone
print((datetime.now(timezone.utc) - timedelta(days=8)).replace(minute=0, second=0, microsecond=0, tzinfo=None).isoformat())')}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=$VENV/bin/python

install() {
  python3.11 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q "Cython<3" setuptools wheel
  # parallel-ssh 1.9.1 as pinned, its C extension regenerated from the .pyx it ships.
  local src; src=$(mktemp -d)
  "$PY" -m pip download -q --no-deps --no-binary :all: -d "$src" parallel-ssh==1.9.1
  tar -xzf "$src"/parallel-ssh-1.9.1.tar.gz -C "$src"
  rm "$src"/parallel-ssh-1.9.1/pssh/native/_ssh2.c
  "$PY" -m pip install -q --no-deps --no-build-isolation "$src"/parallel-ssh-1.9.1
  rm -rf "$src"
  "$PY" -m pip install -q --no-deps tensorhive==1.1.0
  "$PY" -m pip install -q --no-deps -r "$HERE"/requirements.txt
}

configure() {
  # TensorHive copies its default config files into ~/.config/TensorHive on first import;
  # then the benchmark's settings: its database, the API on loopback, and access tokens
  # that outlive the run (the default lifetime is 1 minute, for its web app's refresh).
  HOME=$THHOME "$PY" - "$PORT" <<'PYTHON'
import sys
from tensorhive.config import CONFIG_FILES, config
port = sys.argv[1]
config.set("database", "path", str(CONFIG_FILES.config_dir / "database.sqlite"))
config.set("api", "url_hostname", "127.0.0.1")
config.set("api", "url_port", port)
config.set("api.server", "host", "127.0.0.1")
config.set("api.server", "port", port)
config.set("auth", "jwt_access_token_expires_minutes", "1440")
with open(CONFIG_FILES.MAIN_CONFIG_PATH, "w") as out:
    config.write(out)
PYTHON
}

"$PY" -c 'import tensorhive' 2>/dev/null || install
mkdir -p "$THHOME"
configure
HOME=$THHOME "$PY" "$HERE"/populate.py "$ORIGIN"
echo "TensorHive API on http://127.0.0.1:$PORT/api"
cd "$THHOME"
HOME=$THHOME exec "$PY" -c 'from tensorhive.api.APIServer import start_api_server; start_api_server()'
