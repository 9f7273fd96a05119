#!/bin/bash
# device call N (session 6): fwd prefetch mode 5 (evict-last prefetch + own lines reset to normal)
# as default; checks, full bench vs upstream, A/B modes 0/1/5 + peer, bwd .cs variant, L2 probe.
set -u
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ CAUSAL_CONV1D_FORCE_BUILD=TRUE
R=$OUT
LOGS=/tmp/kab; mkdir -p $LOGS; export LOGS
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
DEADLINE_S=200 UPSTREAM_SDIST=.carry16/causal_conv1d-1.7.0.tar.gz OUT=$R bash benchmarks/kernel_ab.sh build > $LOGS/kab.out 2>&1
echo "build done at $(el) s" | tee -a $LOGS/summary.txt
grep -h "build wall" $LOGS/build.log $LOGS/upstream_build.log | tail -2 >> $LOGS/summary.txt
SAN_FAST="import sys; sys.path.insert(0, 'tests/gpu'); import test_fwd_cf_fast as f, test_bwd_cf_fast as b; sys.exit(min(f.run_cases() + b.run_cases(), 100))"
( timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu tests/causal_conv1d > $LOGS/suite.txt 2>&1 ) &
( env CAUSAL_CONV1D_EXP_PF_MODE=1 CAUSAL_CONV1D_EXP_BWD_CS=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_fwd_cf_fast.py tests/gpu/test_bwd_cf_fast.py tests/gpu/test_kernel_paths.py > $LOGS/t_m1.txt 2>&1 ) &
( timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 tests/gpu/sanitize_driver.py > $LOGS/san_memcheck.txt 2>&1 ) &
( timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 python3 tests/gpu/sanitize_driver.py > $LOGS/san_racecheck.txt 2>&1 ) &
( timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -c "$SAN_FAST" > $LOGS/san_fast.txt 2>&1; echo "rc=$?" >> $LOGS/san_fast.txt ) &
wait
tail -1 $LOGS/suite.txt | sed "s/^/gpu suite: /" | tee -a $LOGS/summary.txt
tail -1 $LOGS/t_m1.txt | sed "s/^/tests mode1+bwdcs: /" | tee -a $LOGS/summary.txt
for f in san_memcheck san_racecheck san_fast; do tail -2 $LOGS/$f.txt | sed "s/^/$f: /" | tee -a $LOGS/summary.txt; done
echo "checks done at $(el) s" | tee -a $LOGS/summary.txt
UP=/tmp/upstream/causal_conv1d-1.7.0
timeout 150 python3 benchmarks/bench.py --kernel --peer $UP --json $LOGS/kernel.json > $LOGS/bench.log 2>&1
grep -v "^\[" $LOGS/bench.log | tail -45 >> $LOGS/summary.txt
echo "bench done at $(el) s" | tee -a $LOGS/summary.txt
FWD="fwd bf16 cf B4 D4096 L4096,fwd fp16 cf B4,cf W2,cf W3,cf 7B B1 L8192,fwd fp32 cf B4,fwd bf16 cf B16"
BWD="bwd fp32 cf B4,bwd bf16 cf B16"
ab() {  # ab TAG ROWS ENV...
  local tag=$1 rows=$2; shift 2
  [ $(el) -gt 545 ] && { echo "skip $tag (deadline)" >> $LOGS/summary.txt; return; }
  timeout 50 env "$@" python3 benchmarks/bench.py --kernel-worker --quick --only "$rows" --out $LOGS/ab_$tag.json > $LOGS/ab_$tag.log 2>&1
  grep "^\[" $LOGS/ab_$tag.log | sed "s/^/$tag /" >> $LOGS/summary.txt
}
pab() {
  local tag=$1 rows=$2
  [ $(el) -gt 545 ] && return
  timeout 50 python3 benchmarks/bench.py --kernel-worker --quick --peer $UP --only "$rows" --out $LOGS/ab_$tag.json > $LOGS/ab_$tag.log 2>&1
  grep "^\[" $LOGS/ab_$tag.log | sed "s/^/$tag /" >> $LOGS/summary.txt
}
for pass in 1 2; do
  ab m0_$pass "$FWD" CAUSAL_CONV1D_EXP_PF_MODE=0
  ab m1_$pass "$FWD" CAUSAL_CONV1D_EXP_PF_MODE=1
  ab m5_$pass "$FWD" CAUSAL_CONV1D_EXP_PF_MODE=5
  pab peer_$pass "$FWD,$BWD"
  ab cs0_$pass "$BWD" CAUSAL_CONV1D_EXP_BWD_CS=0
  ab cs1_$pass "$BWD" CAUSAL_CONV1D_EXP_BWD_CS=1
  echo "pass $pass done at $(el) s" | tee -a $LOGS/summary.txt
done
for m in 0 1 5; do CAUSAL_CONV1D_EXP_PF_MODE=$m timeout 30 python3 .carry16/l2probe.py 2>&1 | tail -1 | sed "s/^/l2probe mode /" >> $LOGS/summary.txt; done
echo "all done at $(el) s" | tee -a $LOGS/summary.txt
cp $LOGS/summary.txt $LOGS/kernel.json $R/ 2>/dev/null
tar czf $R/logs.tgz -C $LOGS . 2>/dev/null
grep -v "^\[[0-9]" $LOGS/summary.txt | tail -150
