#!/bin/bash
# One device session for issue 16 (kernel against kernel): builds ours (sm_90) and upstream
# causal-conv1d from its sdist (patched copy: sm_90 only) side by side, runs the fast channel-first
# tests, the kernel-mode benchmark ours vs upstream, A/B runs of the bulk-copy kernels' switches,
# compute-sanitizer over the bulk kernels' small shapes, and ncu on the two bf16 channel-first rows.
# Every step's log goes to $OUT; steps stop at a deadline (DEADLINE_S, default 400 s from the start).
#
#   OUT=/tmp/out UPSTREAM_SDIST=causal_conv1d-1.7.0.tar.gz bash benchmarks/kernel_ab.sh [steps...]
#
# steps (default: all, in this order): build tests bench ab ncu memcheck racecheck
set -u
OUT=${OUT:-build/kernel_ab}
mkdir -p "$OUT"
T0=$(date +%s)
DEADLINE=$((T0 + ${DEADLINE_S:-400}))
SDIST=${UPSTREAM_SDIST:-causal_conv1d-1.7.0.tar.gz}
UP=/tmp/upstream/causal_conv1d-1.7.0
STEPS=${*:-build tests bench ab ncu memcheck racecheck}
PY=python3
REPO=$(pwd)
export PYTHONUNBUFFERED=1

log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/summary.txt"; }
left() { echo $((DEADLINE - $(date +%s))); }
has() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# run NAME SECONDS CMD...: bounded by the deadline, output to $OUT/NAME.log
run() {
  local name=$1 lim=$2
  shift 2
  local l
  l=$(left)
  [ "$lim" -gt "$l" ] && lim=$l
  if [ "$lim" -le 5 ]; then log "skip $name (deadline)"; return 124; fi
  log "start $name (limit ${lim}s)"
  timeout "$lim" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  log "end $name rc=$rc"
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$OUT/gpu.txt" 2>&1
$PY -c "import torch; print(torch.__version__, torch.version.cuda)" >>"$OUT/gpu.txt" 2>&1

if has build; then
  # upstream, in the background: only sm_90 (its setup.py hard-codes a list of gencodes)
  (
    set -e
    mkdir -p /tmp/upstream
    tar xzf "$SDIST" -C /tmp/upstream
    cd "$UP"
    $PY "$REPO/benchmarks/peer_build_patch.py"
    /usr/bin/time -f "upstream build wall %e s" env CAUSAL_CONV1D_FORCE_BUILD=TRUE MAX_JOBS=12 \
      $PY setup.py build_ext --inplace
  ) >"$OUT/upstream_build.log" 2>&1 &
  UP_PID=$!
  run build 300 /usr/bin/time -f "ours build wall %e s" env TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 \
    $PY -m pip install --no-build-isolation --no-deps -e . || { log "our build failed"; tail -30 "$OUT/build.log"; }
  tail -1 "$OUT/build.log" | tee -a "$OUT/summary.txt"
fi

if has tests; then
  run tests 170 $PY -m pytest -q tests/gpu/test_fwd_cf_fast.py tests/gpu/test_bwd_cf_fast.py
  tail -3 "$OUT/tests.log" | tee -a "$OUT/summary.txt"
fi

if has build; then
  log "waiting for the upstream build"
  wait $UP_PID
  log "upstream build rc=$?"
  tail -2 "$OUT/upstream_build.log" | tee -a "$OUT/summary.txt"
fi

if has bench; then
  PEER=()
  ls "$UP"/causal_conv1d_cuda*.so >/dev/null 2>&1 && PEER=(--peer "$UP")
  run bench 120 $PY benchmarks/bench.py --kernel "${PEER[@]}" --json "$OUT/kernel.json"
  grep -v "^\[" "$OUT/bench.log" | tail -45 >>"$OUT/summary.txt"
fi

if has ab; then
  ROWS="bf16 cf B4 D4096 L4096,fp16 cf B4,cf 7B B1 L8192,cf W2,cf W3,bwd bf16 cf B16"
  for v in "DEFAULT=1" "FWD_BULK=1 BWD_BULK=1 FWD_BULK_STAGES=4 BWD_BULK_STAGES=3" \
    "FWD_WALK=1" "FWD_WALK=1 FWD_WALK_STEPS=16"; do
    envs=()
    for kv in $v; do envs+=("CAUSAL_CONV1D_$kv"); done
    tag=$(echo "$v" | tr ' =' '_-')
    run "ab_$tag" 40 env "${envs[@]}" $PY benchmarks/bench.py --kernel-worker --quick --only "$ROWS" \
      --out "$OUT/ab_$tag.json"
    grep "^\[ours\]" "$OUT/ab_$tag.log" | sed "s/^/$tag /" >>"$OUT/summary.txt"
  done
fi

if has ncu; then
  cat >/tmp/ncu_drive.py <<'EOF'
import torch, causal_conv1d  # noqa: F401
ops = torch.ops.causal_conv1d
x = torch.randn(4, 4096, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
d = torch.randn_like(x)
for _ in range(2):
    ops.fwd.default(x, w, b, None, None, False, True)
    ops.bwd.default(x, w, b, d, None, None, None, False, True)
torch.cuda.synchronize()
EOF
  # the default (register-only) kernels, then the candidates
  for cfg in ${NCU_CFGS:-"DEFAULT=1"}; do
    envs=()
    for kv in $cfg; do envs+=("CAUSAL_CONV1D_$kv"); done
    tag=$(echo "$cfg" | tr ' =' '_-')
    run "ncu_$tag" 45 env "${envs[@]}" ncu --clock-control none -k "regex:cf_(bulk|fast|walk)_kernel" \
      --launch-skip 2 --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats $PY /tmp/ncu_drive.py
    grep -E "cf_(bulk|fast|walk)_kernel|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Compute \(SM\) Throughput|No Eligible" \
      "$OUT/ncu_$tag.log" | sed "s/^/$tag /" | head -30 >>"$OUT/summary.txt"
  done
fi

SAN_ENV=(CAUSAL_CONV1D_FWD_WALK=1 CAUSAL_CONV1D_FWD_WALK_STEPS=3 CAUSAL_CONV1D_BWD_BULK=1
  CAUSAL_CONV1D_BWD_BULK_BLOCKS=1 CAUSAL_CONV1D_BWD_BULK_STAGES=2)
for tool in memcheck racecheck; do
  if has $tool; then
    run "sanitizer_$tool" 60 env "${SAN_ENV[@]}" compute-sanitizer --tool $tool --error-exitcode 3 \
      $PY tests/gpu/sanitize_bulk.py
    tail -4 "$OUT/sanitizer_$tool.log" | tee -a "$OUT/summary.txt"
  fi
done

log "done"
