#!/bin/bash
# bwd40 (issue 39, session 37), run 1 (<= 52 s), from the root of main's tree:
#   OUT=/tmp/out_bwd40 timeout 56 bash .carry/bwd40/run1.sh
# 1. tests (the branch's wheel): the dQ claims by default pinned both ways (fwd_sm80_cfg=15: the op's fill, 13: the
#    claims), the default's kernel names (kPdsDqClaim where it claims), the rows past the last sequence zero
# 2. timing, one process, interleaved: main = the branch's default (claims at bf16 D = 128 / 256 heads first), fill =
#    fwd_sm80_cfg=15 (main's path before), claim = fwd_sm80_cfg=13, FA2 (torch SDPA flash); bf16 causal H4
# 3. ncu (if time is left): the D = 128 loop against FA2's dq_dk_dv at B4 S16K (stalls, instructions, tensor pipe)
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
K="dq_claims_rule or (dq_claims and (bf16-128 or bf16-256)) or runs_its_kernel or runs_the_layout"
run_tests 19 "$K or (dq_workspace_layouts and 128)" tests/hstu/test_kernels_gpu.py tests/hstu/test_sm80_backward_gpu.py
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 13 )) python3 -P $T39 time --bench $R/benchmarks \
    --variants main fill claim --reps 5 --shapes B128:S1024:D128 B256:S256:D256 B256:S512:D128 B128:S1024:D256 \
    B16:S16384:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_red.sum,dram__bytes_read.sum
if [ -n "$NCU" ] && [ $(left) -gt 8 ]; then
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 2 )) $NCU --clock-control none \
      -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" --section WarpStateStats --section InstructionStats --metrics $M \
      -o $OUT/d128 -f python3 -P $T39 ncu --bench $R/benchmarks --variants main fa2 --shapes B4:S16384:D128 \
      > $OUT/ncu_d128.log 2>&1
  echo "ncu rc $? ($SECONDS s)"
  [ -f $OUT/d128.ncu-rep ] && timeout 3 $NCU --import $OUT/d128.ncu-rep --page raw --csv > $OUT/ncu_d128.csv \
      2>> $OUT/ncu_d128.log
fi
echo "################ DIGEST ($GPU; done at $SECONDS s)"
# (the lead sees the last ~1,500 characters: ncu first, the times, the tests last)
python3 $C/ncu_digest.py $OUT/ncu_d128.csv 2>&1 | grep -v "sass__" |
    sed 's/smsp__//g; s/\.avg\.pct_of_peak_sustained_active//g' | cut -c1-150 | head -6
echo "#### bwd ms: default (claims) / fill (cfg 15) / claim (13) / FA2; FA2 / default, FA2 / fill"
python3 - $OUT/time.log <<'PY'
import re, sys
for line in open(sys.argv[1]):
    if not line.startswith("B"):
        continue
    v = dict(re.findall(r"(main|fill|claim|fa2) ([\d.]+)(?= )", line.split("|")[0]))
    t = {k: float(x) for k, x in v.items()}
    r = f" {t['fa2'] / t['main']:.3f}x {t['fa2'] / t['fill']:.3f}x" if "fa2" in t and "fill" in t else ""
    print(line.split()[0], " ".join(f"{k} {x:.4f}" for k, x in t.items()),
          f"def/fill {t['main'] / t['fill'] - 1:+.2%}" if "fill" in t else "", r)
PY
grep -E "rror|Traceback" $OUT/time.log | cut -c1-150 | head -2
echo "#### tests"
digest_tests | cut -c1-200 | tail -5; digest_progress
