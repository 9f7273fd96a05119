#!/bin/bash
# device call S (session 7): main's final kernels (cf forward: evict-last L2 prefetch 3/8 of the resident
# warps ahead, reset by its evict_normal loads; evict-first stores; 32-bit offsets): build ours + upstream,
# GPU suite, sanitizers, kernel bench vs upstream, the contested rows again, the L2 probe.
set -u
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ CAUSAL_CONV1D_FORCE_BUILD=TRUE
R=$OUT
LOGS=/tmp/kab; mkdir -p $LOGS; export LOGS
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
DEADLINE_S=200 UPSTREAM_SDIST=.carry18/causal_conv1d-1.7.0.tar.gz OUT=$R bash benchmarks/kernel_ab.sh build > $LOGS/kab.out 2>&1
echo "build done at $(el) s" | tee -a $LOGS/summary.txt
grep -h "build wall" $LOGS/build.log $LOGS/upstream_build.log | tail -2 >> $LOGS/summary.txt
SAN_FAST="import sys; sys.path.insert(0, 'tests/gpu'); import test_fwd_cf_fast as f, test_bwd_cf_fast as b; sys.exit(min(f.run_cases() + b.run_cases(), 100))"
SAN_PF="import sys; sys.path.insert(0, 'tests/gpu'); import test_fwd_cf_fast as f; sys.exit(min(f.run_cases('prefetch'), 100))"
( timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu tests/causal_conv1d > $LOGS/suite.txt 2>&1 ) &
( timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 tests/gpu/sanitize_driver.py > $LOGS/san_memcheck.txt 2>&1 ) &
( timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 python3 tests/gpu/sanitize_driver.py > $LOGS/san_racecheck.txt 2>&1 ) &
( timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -c "$SAN_FAST" > $LOGS/san_fast.txt 2>&1; echo "rc=$?" >> $LOGS/san_fast.txt ) &
( timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -c "$SAN_PF" > $LOGS/san_pf.txt 2>&1; echo "rc=$?" >> $LOGS/san_pf.txt ) &
wait
tail -1 $LOGS/suite.txt | sed "s/^/gpu suite: /" | tee -a $LOGS/summary.txt
grep -h "cases passed\|path check" $LOGS/san_fast.txt $LOGS/san_pf.txt | sed "s/^/cases: /" >> $LOGS/summary.txt
for f in san_memcheck san_racecheck san_fast san_pf; do tail -2 $LOGS/$f.txt | sed "s/^/$f: /" | tee -a $LOGS/summary.txt; done
echo "checks done at $(el) s" | tee -a $LOGS/summary.txt
UP=/tmp/upstream/causal_conv1d-1.7.0
timeout 150 python3 benchmarks/bench.py --kernel --peer $UP --json $LOGS/kernel.json > $LOGS/bench.log 2>&1
grep -v "^\[" $LOGS/bench.log | tail -45 >> $LOGS/summary.txt
echo "bench done at $(el) s" | tee -a $LOGS/summary.txt
ROWS="fwd bf16 cf B4 D4096 L4096,fwd fp16 cf B4,cf W2,cf W3,cf 7B B1 L8192,fwd fp32 cf B4,bwd fp32 cf B4,bf16 cf B16"
for pass in 2; do
  [ $(el) -gt 380 ] && break
  timeout 50 python3 benchmarks/bench.py --kernel-worker --quick --only "$ROWS" --out $LOGS/o_$pass.json > $LOGS/o_$pass.log 2>&1
  grep "^\[" $LOGS/o_$pass.log | sed "s/^/pass$pass /" >> $LOGS/summary.txt
  timeout 50 python3 benchmarks/bench.py --kernel-worker --quick --peer $UP --only "$ROWS" --out $LOGS/p_$pass.json > $LOGS/p_$pass.log 2>&1
  grep "^\[" $LOGS/p_$pass.log | sed "s/^/pass$pass /" >> $LOGS/summary.txt
done
timeout 30 python3 .carry18/l2probe.py main 2>&1 | tail -1 | sed "s/^/l2probe /" >> $LOGS/summary.txt
timeout 40 python3 .carry18/copy_probe.py 2>&1 | tail -1 | sed "s/^/copy /" >> $LOGS/summary.txt
echo "all done at $(el) s" | tee -a $LOGS/summary.txt
cp $LOGS/summary.txt $LOGS/kernel.json $R/ 2>/dev/null
tar czf $R/logs.tgz -C $LOGS . 2>/dev/null
grep -v "^\[[0-9]" $LOGS/summary.txt | tail -120
