# shellcheck shell=bash
# Sourced by bin/serve and bin/test: make .venv (Python 3.11) and install the given
# requirements file when it changed since the last install.
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
stamp=".venv/.installed-$(basename "$1")"
digest=$(cat "$1" requirements.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
  .venv/bin/python -m pip install -q -r "$1"
  echo "$digest" >"$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
