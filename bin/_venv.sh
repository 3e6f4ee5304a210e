# shellcheck shell=bash
# Sourced by bin/serve, bin/test and .ci/run: make .venv (Python 3.11) and install each
# argument that changed since its last install. A requirements*.txt argument is a lock made by
# pip-compile (every package pinned, with its hashes; docs/development.md): pip installs it
# with --require-hashes, so nothing unpinned or altered gets in. A folder argument (cli) is a
# package of this tree, installed editable without its dependencies (the lock brings them; an
# editable install has no file to hash) and built by the lock's setuptools.
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
for part in "$@"; do
  stamp=".venv/.installed-$(basename "$part")"
  if [ -d "$part" ]; then
    digest=$(sha256sum "$part/pyproject.toml" | cut -d' ' -f1)
    install=(--no-deps --no-build-isolation -e "./$part")
  else
    digest=$(sha256sum "$part" | cut -d' ' -f1)
    install=(--require-hashes -r "$part")
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
    .venv/bin/python -m pip install -q "${install[@]}"
    echo "$digest" >"$stamp"
  fi
done
export PATH="$PWD/.venv/bin:$PATH"
