#!/usr/bin/env bash
# The test command (README, "Install"): from a clean clone, set up .venv and run the whole suite.
# GPU tests skip without a GPU. Exit code: pytest's, except "no tests collected" (5) is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=.venv
TORCH_SPEC=${CAUSAL_CONV1D_TEST_TORCH:-torch==2.13.0}

step() { printf '\n== %s\n' "$*"; }

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for pkg in chromium shellcheck; do command -v "$pkg" >/dev/null || missing+=("$pkg"); done
  if [ ${#missing[@]} -gt 0 ]; then
    step "apt-get install ${missing[*]} (landing-page and workflow tests)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
      || echo "warning: could not install ${missing[*]}; the tests that need them will skip" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  step "creating $VENV"
  "$PY" -m venv "$VENV"
fi
step "installing $TORCH_SPEC and the test tools"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "$TORCH_SPEC" -r requirements-dev.txt

build() {  # $1: legacy (CAUSAL_CONV1D_STABLE_ABI=FALSE) or default (stable for torch >= 2.10); csrc/torch_api.h
  step "building the extension in place ($1 op layer, CPU build for a CPU torch)"
  local start
  start=$(date +%s)
  if [ "$1" = legacy ]; then
    CAUSAL_CONV1D_STABLE_ABI=FALSE "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps -e .
  else
    env -u CAUSAL_CONV1D_STABLE_ABI "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps -e .
  fi
  echo "built in $(( $(date +%s) - start )) s"
}

# The whole suite (no arguments) also runs the package tests on the legacy (ATen) op layer first,
# built from the same sources; then everything on the default build (the stable ABI for torch >=
# 2.10). tests/causal_conv1d/test_op_layer.py fails if a build is not the op layer expected.
if [ $# -eq 0 ]; then
  build legacy
  step "pytest tests/causal_conv1d (legacy op layer)"
  CAUSAL_CONV1D_EXPECT_OP_LAYER=legacy "$VENV/bin/python" -m pytest -q tests/causal_conv1d
fi
build default
expect=$("$VENV/bin/python" -c "import torch; v = tuple(int(p) for p in torch.__version__.split('.')[:2]); print('stable' if v >= (2, 10) else 'legacy')")

step "pytest ($expect op layer)"
set +e
CAUSAL_CONV1D_EXPECT_OP_LAYER=$expect "$VENV/bin/python" -m pytest "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "error: pytest collected no tests; that is a failure here, not a success" >&2
  exit 1
fi
exit "$rc"
