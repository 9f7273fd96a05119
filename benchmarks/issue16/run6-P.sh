#!/bin/bash
# device call P (session 7, branch exp18): fwd cf fast L2 policies (EXP_FWD_POL 0..3) x 32-bit offsets
# (EXP_FWD_OFF 0 main / 2 offsets except bf16 W3-4), tests per candidate, A/B two passes + peer,
# L2 lingering probe per policy, ncu of the bf16 row for POL 0 / 1.
set -u
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ CAUSAL_CONV1D_FORCE_BUILD=TRUE PYTHONUNBUFFERED=1
R=$OUT; LOGS=/tmp/kab; mkdir -p $LOGS; export LOGS
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
DEADLINE_S=220 UPSTREAM_SDIST=.carry18/causal_conv1d-1.7.0.tar.gz OUT=$R bash benchmarks/kernel_ab.sh build > $LOGS/kab.out 2>&1
echo "build done at $(el) s" | tee -a $LOGS/summary.txt
grep -h "build wall" $LOGS/build.log $LOGS/upstream_build.log | tail -2 >> $LOGS/summary.txt
T="tests/gpu/test_fwd_cf_fast.py tests/gpu/test_kernel_paths.py"
( env CAUSAL_CONV1D_EXP_FWD_POL=1 timeout 120 python3 -m pytest -q -p no:cacheprovider $T > $LOGS/t_p1.txt 2>&1 ) &
( env CAUSAL_CONV1D_EXP_FWD_POL=0 CAUSAL_CONV1D_EXP_FWD_OFF=1 timeout 120 python3 -m pytest -q -p no:cacheprovider $T > $LOGS/t_off1.txt 2>&1 ) &
( env CAUSAL_CONV1D_EXP_FWD_POL=2 CAUSAL_CONV1D_EXP_FWD_OFF=0 timeout 120 python3 -m pytest -q -p no:cacheprovider $T > $LOGS/t_p2.txt 2>&1 ) &
wait
for f in t_p1 t_off1 t_p2; do tail -1 $LOGS/$f.txt | sed "s/^/$f: /" | tee -a $LOGS/summary.txt; done
echo "tests done at $(el) s" | tee -a $LOGS/summary.txt
UP=/tmp/upstream/causal_conv1d-1.7.0
FWD="fwd bf16 cf B4 D4096 L4096,fwd fp16 cf B4,cf W2,cf W3,cf 7B B1 L8192,fwd fp32 cf B4,fwd bf16 cf B16"
ab() {  # ab TAG ENV...
  local tag=$1; shift
  [ $(el) -gt 470 ] && { echo "skip $tag (deadline)" >> $LOGS/summary.txt; return; }
  timeout 50 env "$@" python3 benchmarks/bench.py --kernel-worker --quick --only "$FWD" --out $LOGS/ab_$tag.json > $LOGS/ab_$tag.log 2>&1
  grep "^\[" $LOGS/ab_$tag.log | sed "s/^/$tag /" >> $LOGS/summary.txt
}
for pass in 1 2; do
  ab base_$pass CAUSAL_CONV1D_EXP_FWD_POL=0 CAUSAL_CONV1D_EXP_FWD_OFF=0
  ab off_$pass CAUSAL_CONV1D_EXP_FWD_POL=0 CAUSAL_CONV1D_EXP_FWD_OFF=2
  ab p1_$pass CAUSAL_CONV1D_EXP_FWD_POL=1
  ab p2_$pass CAUSAL_CONV1D_EXP_FWD_POL=2
  ab p3_$pass CAUSAL_CONV1D_EXP_FWD_POL=3
  ab p1d6_$pass CAUSAL_CONV1D_EXP_FWD_POL=1 CAUSAL_CONV1D_EXP_PF=6
  [ $(el) -gt 470 ] || { timeout 50 python3 benchmarks/bench.py --kernel-worker --quick --peer $UP --only "$FWD" --out $LOGS/peer_$pass.json > $LOGS/peer_$pass.log 2>&1; grep "^\[" $LOGS/peer_$pass.log | sed "s/^/peer_$pass /" >> $LOGS/summary.txt; }
  echo "pass $pass done at $(el) s" | tee -a $LOGS/summary.txt
done
for m in 0 1 2 3; do CAUSAL_CONV1D_EXP_FWD_POL=$m timeout 30 python3 .carry18/l2probe.py pol$m 2>&1 | tail -1 | sed "s/^/l2probe /" >> $LOGS/summary.txt; done
echo "probe done at $(el) s" | tee -a $LOGS/summary.txt
cat > /tmp/ncu_drive.py <<'PY'
import torch, causal_conv1d  # noqa: F401
ops = torch.ops.causal_conv1d
x = torch.randn(4, 4096, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4, device="cuda", dtype=torch.bfloat16); b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
for _ in range(3): ops.fwd.default(x, w, b, None, None, False, True)
torch.cuda.synchronize()
PY
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read.sum
for m in 0 1; do
  [ $(el) -gt 540 ] && break
  CAUSAL_CONV1D_EXP_FWD_POL=$m timeout 40 ncu --clock-control none -k regex:fwd_cf_fast_kernel --launch-skip 2 --launch-count 1 --metrics $M python3 /tmp/ncu_drive.py > $LOGS/ncu_$m.txt 2>&1
  grep -E "^\s+(gpu__|dram__|lts__|sm__)" $LOGS/ncu_$m.txt | sed "s/^/ncu pol$m /" >> $LOGS/summary.txt
done
echo "all done at $(el) s" | tee -a $LOGS/summary.txt
cp $LOGS/summary.txt $R/ 2>/dev/null
tar czf $R/logs.tgz -C $LOGS . 2>/dev/null
grep -v "^\[[0-9]" $LOGS/summary.txt | sed 's/, rel err [0-9.e-]*//' | tail -150
