#!/bin/bash
# device call R (session 7, branch exp18): x through shared memory by cp.async at 48 warps/SM (POL 6) against POL 4 at 3/8 and main; two passes + peer; L2 probe.
set -u
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ CAUSAL_CONV1D_FORCE_BUILD=TRUE PYTHONUNBUFFERED=1
R=$OUT; LOGS=/tmp/kab; mkdir -p $LOGS; export LOGS
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
DEADLINE_S=220 UPSTREAM_SDIST=.carry18/causal_conv1d-1.7.0.tar.gz OUT=$R bash benchmarks/kernel_ab.sh build > $LOGS/kab.out 2>&1
echo "build done at $(el) s" | tee -a $LOGS/summary.txt
T="tests/gpu/test_fwd_cf_fast.py tests/gpu/test_kernel_paths.py"
( env CAUSAL_CONV1D_EXP_FWD_POL=6 CAUSAL_CONV1D_EXP_PF=3 timeout 120 python3 -m pytest -q -p no:cacheprovider $T > $LOGS/t_p6.txt 2>&1 ) &
( env CAUSAL_CONV1D_EXP_FWD_POL=6 CAUSAL_CONV1D_EXP_FWD_OFF=1 timeout 120 python3 -m pytest -q -p no:cacheprovider $T > $LOGS/t_p6o.txt 2>&1 ) &
wait
for f in t_p6 t_p6o; do tail -1 $LOGS/$f.txt | sed "s/^/$f: /" | tee -a $LOGS/summary.txt; done
UP=/tmp/upstream/causal_conv1d-1.7.0
FWD="fwd bf16 cf B4 D4096 L4096,fwd fp16 cf B4,cf W2,cf W3,cf 7B B1 L8192,fwd fp32 cf B4,fwd bf16 cf B16"
ab() {  # ab TAG ENV...
  local tag=$1; shift
  [ $(el) -gt 500 ] && { echo "skip $tag (deadline)" >> $LOGS/summary.txt; return; }
  timeout 50 env "$@" python3 benchmarks/bench.py --kernel-worker --quick --only "$FWD" --out $LOGS/ab_$tag.json > $LOGS/ab_$tag.log 2>&1
  grep "^\[" $LOGS/ab_$tag.log | sed "s/^/$tag /" >> $LOGS/summary.txt
}
for pass in 1 2; do
  ab base_$pass CAUSAL_CONV1D_EXP_FWD_POL=0 CAUSAL_CONV1D_EXP_FWD_OFF=0
  ab p4d3_$pass CAUSAL_CONV1D_EXP_FWD_POL=4 CAUSAL_CONV1D_EXP_PF=3
  ab p6d3_$pass CAUSAL_CONV1D_EXP_FWD_POL=6 CAUSAL_CONV1D_EXP_PF=3
  ab p6d4_$pass CAUSAL_CONV1D_EXP_FWD_POL=6 CAUSAL_CONV1D_EXP_PF=4
  ab p6d2_$pass CAUSAL_CONV1D_EXP_FWD_POL=6 CAUSAL_CONV1D_EXP_PF=2
  timeout 50 python3 benchmarks/bench.py --kernel-worker --quick --peer $UP --only "$FWD" --out $LOGS/peer_$pass.json > $LOGS/peer_$pass.log 2>&1
  grep "^\[" $LOGS/peer_$pass.log | sed "s/^/peer_$pass /" >> $LOGS/summary.txt
  echo "pass $pass done at $(el) s" | tee -a $LOGS/summary.txt
done
for m in 0 4 6; do CAUSAL_CONV1D_EXP_PF=3 CAUSAL_CONV1D_EXP_FWD_POL=$m timeout 30 python3 .carry18/l2probe.py pol$m 2>&1 | tail -1 | sed "s/^/l2probe /" >> $LOGS/summary.txt; done
for m in 6; do CAUSAL_CONV1D_EXP_PF=3 CAUSAL_CONV1D_EXP_FWD_POL=$m timeout 40 python3 .carry18/copy_probe.py 2>&1 | tail -1 | sed "s/^/copy pol$m /" >> $LOGS/summary.txt; done
echo "all done at $(el) s" | tee -a $LOGS/summary.txt
cp $LOGS/summary.txt $R/ 2>/dev/null
tar czf $R/logs.tgz -C $LOGS . 2>/dev/null
grep -v "^\[[0-9]" $LOGS/summary.txt | sed 's/, rel err [0-9.e-]*//; s/, eager [0-9.]* us//' | tail -150
