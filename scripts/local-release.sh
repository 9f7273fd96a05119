#!/usr/bin/env bash
# The local release (README, "Install"; docs/release.md): rehearse the whole release pipeline on this machine.
#   bash scripts/local-release.sh [options of `python -m release local`; --help lists them]
# With no options: plan the matrix, build the stable-ABI CPU wheel stable2.10-cpu (one wheel for
# every torch >= 2.10, compiled against this machine's torch 2.13) and the stable-ABI CUDA 13 wheel
# when nvcc 13 is here (one GPU architecture), check the wheels, publish them into a local index site
# (the torch >= 2.10 pages link them), serve it on 127.0.0.1, pip-install the CPU wheel from
# whl/torch2.13-cpu/ into a fresh venv and run the op against the reference. Everything goes under
# out/local-release/ (logs/, report.json); the exit status is 0 only when every step passed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
TOOLS=${CAUSAL_CONV1D_RELEASE_VENV:-.venv-release}

if ! command -v "$PY" > /dev/null; then
  echo "error: $PY not found; install Python >= 3.9 or set PYTHON=/path/to/python" >&2
  exit 2
fi

# The tools venv: build_matrix, index_site and release need packaging, requests and jinja2 (no torch).
stamp="$TOOLS/.requirements.sha256"
want=$(sha256sum release/requirements.txt | cut -d' ' -f1)
if [ ! -x "$TOOLS/bin/python" ] || [ "$(cat "$stamp" 2> /dev/null)" != "$want" ]; then
  printf '== preparing the release tools venv %s\n' "$TOOLS"
  start=$(date +%s)
  "$PY" -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install -qq --disable-pip-version-check -r release/requirements.txt
  echo "$want" > "$stamp"
  echo "   ready in $(($(date +%s) - start)) s"
fi

exec "$TOOLS/bin/python" -m release local "$@"
