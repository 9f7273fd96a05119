#!/usr/bin/env bash
# THE GPU check (run on a CUDA machine, e.g. the H200 device machine): build the extension for
# this GPU, run the GPU tests (package tests parametrised over device + tests/gpu), the
# compute-sanitizer memcheck/racecheck driver, and the benchmark. Logs go to $OUT (default
# ./build/gpu-check). Exit code: non-zero if the build, any test, the sanitizer or the benchmark's
# correctness checks failed.
#
#   TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 scripts/gpu-check.sh [--no-bench] [--no-sanitizer]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

OUT=${OUT:-$PWD/build/gpu-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export MAX_JOBS=${MAX_JOBS:-16}
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  TORCH_CUDA_ARCH_LIST=$("$PY" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')
  export TORCH_CUDA_ARCH_LIST
fi
BENCH=1
SANITIZE=1
for a in "$@"; do
  case "$a" in
    --no-bench) BENCH=0 ;;
    --no-sanitizer) SANITIZE=0 ;;
    *) echo "unknown option: $a" >&2; exit 2 ;;
  esac
done
status=0
export CAUSAL_CONV1D_FORCE_BUILD=TRUE  # compile here; never fetch a prebuilt wheel
step() { printf '\n== %s\n' "$*"; }

step "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
nvcc --version | tail -1

# A C++ compiler that has no shared libstdc++ (e.g. a relocated gcc shipping only libstdc++.a)
# links a second, static libstdc++ into _C.so next to the one torch loads; formatting an error
# message then crashes (seen on the H200 image with /opt/gcc/bin/g++ as `c++`). Prefer a
# compiler whose libstdc++.so exists.
shared_libstdcxx() { local f; f=$("$1" -print-file-name=libstdc++.so 2>/dev/null) && [ -e "$f" ] && [ "$f" != libstdc++.so ]; }
cxx=${CXX:-c++}
if command -v "$cxx" >/dev/null && ! shared_libstdcxx "$cxx"; then
  for alt in /usr/bin/g++ /usr/bin/c++ g++; do
    if command -v "$alt" >/dev/null && shared_libstdcxx "$alt"; then
      echo "note: $(command -v "$cxx") has no shared libstdc++; building with $alt instead"
      export CXX=$alt CUDAHOSTCXX=$alt
      [ -x "${alt%++}cc" ] && export CC="${alt%++}cc"
      break
    fi
  done
fi

step "build (TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST MAX_JOBS=$MAX_JOBS)"
start=$(date +%s.%N)
if ! "$PY" -m pip install --no-build-isolation --no-deps -v -e . >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  echo "BUILD FAILED (full log: build.log)"
  exit 1
fi
end=$(date +%s.%N)
build_s=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
echo "build wall time: ${build_s} s" | tee "$OUT/build_time.txt"
grep -E "warning|error" "$OUT/build.log" | grep -v -E "^\s*$|Wno-|UserWarning" | head -20 || true
(cd /tmp && "$PY" -c 'import causal_conv1d, torch; print("import causal_conv1d OK", causal_conv1d.__version__)') 2>&1 \
  | tail -3 | tee "$OUT/import.log"
so=$(find causal_conv1d -maxdepth 1 -name "_C*.so" | head -1)
if [ -n "$so" ] && command -v readelf >/dev/null; then
  echo "libraries $so needs: $(readelf -d "$so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')" | tee -a "$OUT/import.log"
fi

# the folders that hold GPU tests (the others import build tools a GPU machine need not have)
step "pytest -m gpu tests/gpu tests/causal_conv1d"
"$PY" -m pytest -m gpu tests/gpu tests/causal_conv1d -q -p no:cacheprovider -rfEs --durations=5 2>&1 | tee "$OUT/pytest.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || status=1

if [ "$SANITIZE" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    step "compute-sanitizer --tool $tool (small shapes)"
    compute-sanitizer --tool "$tool" --error-exitcode 3 "$PY" tests/gpu/sanitize_driver.py 2>&1 \
      | grep -v "^========= COMPUTE-SANITIZER$" | tail -15 | tee "$OUT/sanitizer_$tool.log"
    rc=${PIPESTATUS[0]}
    echo "compute-sanitizer $tool exit code: $rc" | tee -a "$OUT/sanitizer_$tool.log"
    [ "$rc" = 0 ] || status=1
  done
fi

if [ "$BENCH" = 1 ]; then
  step "benchmark"
  "$PY" benchmarks/bench.py --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || status=1
  step "serving benchmark (varlen prefill, speculative decode)"
  "$PY" benchmarks/serving_bench.py --json "$OUT/serving_bench.json" ${PEER_VLLM:+--vllm "$PEER_VLLM"} 2>&1 \
    | tee "$OUT/serving_bench.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || status=1
fi
echo "gpu-check exit status: $status"
exit "$status"
