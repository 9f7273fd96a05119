#!/bin/bash
# device call L (session 6): L2-prefetch A/B (modes 1 per-lane, 2 bulk, 3 evict-last; distance in
# eighths of the resident warps), kVecs-2 kernels for short rows (FWD_V2, BWD_V2), with tests per variant.
set -u
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ CAUSAL_CONV1D_FORCE_BUILD=TRUE
R=$OUT
LOGS=/tmp/kab; mkdir -p $LOGS; export LOGS
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
DEADLINE_S=200 UPSTREAM_SDIST=.carry16/causal_conv1d-1.7.0.tar.gz OUT=$R bash benchmarks/kernel_ab.sh build > $LOGS/kab.out 2>&1
echo "build done at $(el) s" | tee -a $LOGS/summary.txt
grep -i "wall\|error" $LOGS/build.log $LOGS/upstream_build.log | tail -4 >> $LOGS/summary.txt
T="tests/gpu/test_fwd_cf_fast.py tests/gpu/test_bwd_cf_fast.py tests/gpu/test_kernel_paths.py"
( timeout 100 python3 -m pytest -q -p no:cacheprovider $T > $LOGS/t_base.txt 2>&1 ) &
( env CAUSAL_CONV1D_EXP_PF=4 CAUSAL_CONV1D_EXP_PF_MODE=1 timeout 100 python3 -m pytest -q -p no:cacheprovider $T > $LOGS/t_pf1.txt 2>&1 ) &
( env CAUSAL_CONV1D_EXP_PF=1 CAUSAL_CONV1D_EXP_PF_MODE=2 timeout 100 python3 -m pytest -q -p no:cacheprovider $T > $LOGS/t_pf2.txt 2>&1 ) &
( env CAUSAL_CONV1D_EXP_FWD_V2=1 CAUSAL_CONV1D_EXP_BWD_V2=1 CAUSAL_CONV1D_EXP_PF=8 CAUSAL_CONV1D_EXP_PF_MODE=3 timeout 100 python3 -m pytest -q -p no:cacheprovider $T > $LOGS/t_v2.txt 2>&1 ) &
wait
for f in t_base t_pf1 t_pf2 t_v2; do tail -1 $LOGS/$f.txt | sed "s/^/$f: /" | tee -a $LOGS/summary.txt; done
echo "tests done at $(el) s" | tee -a $LOGS/summary.txt
UP=/tmp/upstream/causal_conv1d-1.7.0
BIG="fwd bf16 cf B4 D4096 L4096,fwd fp16 cf B4,cf W2,cf 7B B1 L8192,bwd bf16 cf B4,bwd fp32 cf B4,fwd fp32 cf B4"
SMALL="bf16 cf B16"
timeout 60 python3 benchmarks/bench.py --kernel-worker --peer $UP --only "$BIG,$SMALL" --out $LOGS/peer.json > $LOGS/peer.log 2>&1
grep "^\[" $LOGS/peer.log | sed "s/^/peer /" >> $LOGS/summary.txt
echo "peer done at $(el) s" | tee -a $LOGS/summary.txt
ab() {  # ab TAG ROWS ENV...
  local tag=$1 rows=$2; shift 2
  [ $(el) -gt 560 ] && { echo "skip $tag (deadline)" >> $LOGS/summary.txt; return; }
  timeout 45 env "$@" python3 benchmarks/bench.py --kernel-worker --quick --only "$rows" --out $LOGS/ab_$tag.json > $LOGS/ab_$tag.log 2>&1
  grep "^\[ours\]" $LOGS/ab_$tag.log | sed "s/^/$tag /" >> $LOGS/summary.txt
}
for pass in 1 2; do
  ab base$pass "$BIG" CAUSAL_CONV1D_EXP_PF=0
  ab pf1_2_$pass "$BIG" CAUSAL_CONV1D_EXP_PF=2 CAUSAL_CONV1D_EXP_PF_MODE=1
  ab pf1_4_$pass "$BIG" CAUSAL_CONV1D_EXP_PF=4 CAUSAL_CONV1D_EXP_PF_MODE=1
  ab pf1_8_$pass "$BIG" CAUSAL_CONV1D_EXP_PF=8 CAUSAL_CONV1D_EXP_PF_MODE=1
  ab pf2_4_$pass "$BIG" CAUSAL_CONV1D_EXP_PF=4 CAUSAL_CONV1D_EXP_PF_MODE=2
  ab pf3_4_$pass "$BIG" CAUSAL_CONV1D_EXP_PF=4 CAUSAL_CONV1D_EXP_PF_MODE=3
  ab sbase$pass "$SMALL" CAUSAL_CONV1D_EXP_PF=0
  ab sv2_$pass "$SMALL" CAUSAL_CONV1D_EXP_FWD_V2=1 CAUSAL_CONV1D_EXP_BWD_V2=1
  ab sv2pf_$pass "$SMALL" CAUSAL_CONV1D_EXP_FWD_V2=1 CAUSAL_CONV1D_EXP_BWD_V2=1 CAUSAL_CONV1D_EXP_PF=8 CAUSAL_CONV1D_EXP_PF_MODE=1
  ab spf_$pass "$SMALL" CAUSAL_CONV1D_EXP_PF=8 CAUSAL_CONV1D_EXP_PF_MODE=1
  echo "pass $pass done at $(el) s" | tee -a $LOGS/summary.txt
done
cat > /tmp/prof.py <<'PY'
import torch, causal_conv1d  # noqa: F401
from torch.profiler import profile, ProfilerActivity
ops = torch.ops.causal_conv1d
for (B, D, L) in [(16, 1024, 512), (4, 4096, 4096)]:
    x = torch.randn(B, D, L, device="cuda", dtype=torch.bfloat16); d = torch.randn_like(x)
    w = torch.randn(D, 4, device="cuda", dtype=torch.bfloat16); b = torch.randn(D, device="cuda", dtype=torch.bfloat16)
    for _ in range(3): ops.bwd.default(x, w, b, d, None, None, None, False, True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20): ops.bwd.default(x, w, b, d, None, None, None, False, True)
        torch.cuda.synchronize()
    print(B, D, L)
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0)
        if t > 0:
            print(f"  {e.key[:90]:90s} n={e.count} avg={t / max(e.count, 1):.1f} us")
PY
timeout 40 python3 /tmp/prof.py > $LOGS/prof.txt 2>&1; cat $LOGS/prof.txt | head -20 >> $LOGS/summary.txt
echo "all done at $(el) s" | tee -a $LOGS/summary.txt
cp $LOGS/summary.txt $R/ 2>/dev/null
tar czf $R/logs.tgz -C $LOGS . 2>/dev/null
grep -v "^\[[0-9]" $LOGS/summary.txt | tail -150
