#!/bin/bash
# One device session, kernel against kernel: builds ours (sm_90) and upstream
# causal-conv1d from its sdist side by side (a patched copy: sm_90 only, its two big kernel files split
# per instantiation, benchmarks/peer_build_patch.py; ~85 s on 16 cores instead of ~385 s), runs the
# fast channel-first tests, the kernel-mode benchmark ours vs upstream, A/B runs of kernel switches
# (AB_VARIANTS), ncu on the kernel-mode rows (benchmarks/ncu_rows.py, both builds) and compute-sanitizer over the fast channel-first
# test cases. Steps stop at a deadline (DEADLINE_S, default 400 s from the start).
#
#   OUT=/tmp/out UPSTREAM_SDIST=causal_conv1d-1.7.0.tar.gz bash benchmarks/kernel_ab.sh [steps...]
#
# steps (default: all, in this order): build tests bench ab ncu memcheck racecheck
# AB_VARIANTS: ';'-separated variants, each a space-separated list of CAUSAL_CONV1D_* settings
#   without the prefix (default "DEFAULT=1;FWD_FAST=0 BWD_FAST=0": fast against general kernels).
# What comes back: the device tool returns at most 8 files from $OUT, so the logs are written to
# $LOGS and packed into $OUT/logs.tgz at the end; $OUT also gets summary.txt and kernel.json, and the
# summary (the kernel-mode table included) is printed last, so the reply's output tail carries it.
set -u
OUT=${OUT:-build/kernel_ab}
mkdir -p "$OUT"
LOGS=${LOGS:-/tmp/kernel_ab_logs}
mkdir -p "$LOGS"
T0=$(date +%s)
DEADLINE=$((T0 + ${DEADLINE_S:-400}))
SDIST=${UPSTREAM_SDIST:-causal_conv1d-1.7.0.tar.gz}
UP=/tmp/upstream/causal_conv1d-1.7.0
STEPS=${*:-build tests bench ab ncu memcheck racecheck}
PY=python3
REPO=$(pwd)
export PYTHONUNBUFFERED=1

log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$LOGS/summary.txt"; }
left() { echo $((DEADLINE - $(date +%s))); }
has() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# run NAME SECONDS CMD...: bounded by the deadline, output to $LOGS/NAME.log
run() {
  local name=$1 lim=$2
  shift 2
  local l
  l=$(left)
  [ "$lim" -gt "$l" ] && lim=$l
  if [ "$lim" -le 5 ]; then log "skip $name (deadline)"; return 124; fi
  log "start $name (limit ${lim}s)"
  timeout "$lim" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  log "end $name rc=$rc"
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$LOGS/gpu.txt" 2>&1
$PY -c "import torch; print(torch.__version__, torch.version.cuda)" >>"$LOGS/gpu.txt" 2>&1

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
  ) >"$LOGS/upstream_build.log" 2>&1 &
  UP_PID=$!
  run build 300 /usr/bin/time -f "ours build wall %e s" env TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 \
    $PY -m pip install --no-build-isolation --no-deps -e . || { log "our build failed"; tail -30 "$LOGS/build.log"; }
  tail -1 "$LOGS/build.log" | tee -a "$LOGS/summary.txt"
fi

if has tests; then
  run tests 170 $PY -m pytest -q tests/gpu/test_fwd_cf_fast.py tests/gpu/test_bwd_cf_fast.py
  tail -3 "$LOGS/tests.log" | tee -a "$LOGS/summary.txt"
fi

if has build; then
  log "waiting for the upstream build"
  wait $UP_PID
  log "upstream build rc=$?"
  tail -2 "$LOGS/upstream_build.log" | tee -a "$LOGS/summary.txt"
fi

if has bench; then
  PEER=()
  ls "$UP"/causal_conv1d_cuda*.so >/dev/null 2>&1 && PEER=(--peer "$UP")
  run bench 120 $PY benchmarks/bench.py --kernel "${PEER[@]}" --json "$LOGS/kernel.json"
  grep -v "^\[" "$LOGS/bench.log" | tail -45 >>"$LOGS/summary.txt"
fi

if has ab; then
  ROWS=${AB_ROWS:-"bf16 cf B4 D4096 L4096,fp16 cf B4,cf 7B B1 L8192,cf W2,cf W3,bwd bf16 cf B16"}
  IFS=';' read -r -a VARIANTS <<<"${AB_VARIANTS:-DEFAULT=1;FWD_FAST=0 BWD_FAST=0}"
  for v in "${VARIANTS[@]}"; do
    envs=()
    for kv in $v; do envs+=("CAUSAL_CONV1D_$kv"); done
    tag=$(echo "$v" | tr ' =' '_-')
    run "ab_$tag" 40 env "${envs[@]}" $PY benchmarks/bench.py --kernel-worker --quick --only "$ROWS" \
      --out "$LOGS/ab_$tag.json"
    grep "^\[ours\]" "$LOGS/ab_$tag.log" | sed "s/^/$tag /" >>"$LOGS/summary.txt"
  done
fi

if has ncu; then
  # ncu's reading of every kernel of the rows in NCU_ROWS (default: the kernel-mode rows), ours and upstream
  KERNEL_TABLE_ROWS="fwd bf16 cf B4 D4096,bwd bf16 cf B4 D4096,fwd bf16 cl B4 D4096,bwd bf16 cl B4 D4096,fwd fp32 cf B4"
  KERNEL_TABLE_ROWS="$KERNEL_TABLE_ROWS,bwd fp32 cf B4,Mamba2,cf B16 D1024,update bf16 B256 D8192"
  run ncu 240 $PY benchmarks/ncu_rows.py --only "${NCU_ROWS:-$KERNEL_TABLE_ROWS}" \
    --peer "$UP" --json "$LOGS/ncu.json"
  grep "^|" "$LOGS/ncu.log" >>"$LOGS/summary.txt"
fi

SAN_ENV=(CAUSAL_CONV1D_FWD_FAST=1 CAUSAL_CONV1D_BWD_FAST=1)
SAN_PY="import sys; sys.path.insert(0, 'tests/gpu'); import test_fwd_cf_fast as f, test_bwd_cf_fast as b; sys.exit(min(f.run_cases() + b.run_cases(), 100))"
for tool in memcheck racecheck; do
  if has $tool; then
    run "sanitizer_$tool" 90 env "${SAN_ENV[@]}" compute-sanitizer --tool $tool --error-exitcode 3 \
      $PY -c "$SAN_PY"
    tail -4 "$LOGS/sanitizer_$tool.log" | tee -a "$LOGS/summary.txt"
  fi
done

log "done"
cp "$LOGS/summary.txt" "$OUT/" 2>/dev/null
cp "$LOGS/kernel.json" "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
cat "$LOGS/summary.txt"
