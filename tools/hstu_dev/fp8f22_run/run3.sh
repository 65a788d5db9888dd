#!/usr/bin/env bash
# fp8f22 run 3 (issue 36; <= 30 s). The final code's FP8 forward is main's (every lab variant removed: run 2's relay
# CTA pairs hung), so main21's wheel is the final code's wheel and main's tree holds the final tests.
# 1. (background) GPU tests of the final code: the default forward's fp64-emulation rule at D 128 / 256 (tensor /
#    block x causal / context_target_group) and the 192-key tile rule by length.
# 2. (background) ncu, ONE launch per head dim (the brief: counts per pipe, not taken in session 20): the default
#    forward at B4 S8K H4 causal D128 (192-key tiles) and D256 (64-key grid kernel), prof_fp8.py, -c 2, few metrics
#    (the pipes' warp instructions, issue, L2 / DRAM bytes, cycles) + SpeedOfLight; raw values printed. (Instruction
#    and byte counts are exact beside the other processes; the times are not.)
# 3. (foreground) where the relay pairs hang: $C/pair_diag.py with the diag wheel ($C/whl, fp8f22-diag aab1a3b: a
#    watchdog on every wait of the pair kernels records the stuck wait into its CTA's output rows and gives up).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/o_fp8f22}; mkdir -p "$OUT"
R=$PWD
C=$R/.carry/fp8f22
S=/tmp/site_fp8f22_main
DG=/tmp/site_fp8f22_diag
rm -rf $S $DG
python3 -m pip install -q --no-deps --no-index --no-compile --target $S .carry/main21/whl/hstu_attn-*.whl 2>&1 \
    | grep -v WARN | tail -2
python3 -m pip install -q --no-deps --no-index --no-compile --target $DG $C/whl/hstu_attn-*.whl 2>&1 \
    | grep -v WARN | tail -2
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
T=tests/hstu/test_fp8.py
(PYTHONPATH=$S timeout 20 python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib --tb=short -rfE \
    $T::test_cuda_fp8_kernel_matches_emulating_reference $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences \
    -k "wide_tiles or ((128 or 256) and (causal or context_target_group) and (tensor or block) and not local)" \
    > $OUT/tests.log 2>&1; echo "tests rc $? ($SECONDS s)" >> $OUT/tests.log) &
TPID=$!
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,smsp__inst_executed_pipe_xu.sum
M=$M,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_fp16.sum,smsp__inst_executed_pipe_alu.sum
M=$M,sm__inst_executed_pipe_uniform.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum
M=$M,dram__bytes_read.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
(PYTHONPATH=$S timeout $(( 25 - SECONDS )) $NCU --clock-control none -k regex:hstu_fwd_fp8_sm90_kernel -c 2 \
    --section SpeedOfLight --metrics $M -o $OUT/ncu -f python3 -P tools/hstu_dev/fp8f17_run/prof_fp8.py 128:0 256:0 \
    > $OUT/ncu.log 2>&1; echo "ncu rc $? ($SECONDS s)" >> $OUT/ncu.log) &
NPID=$!
echo "== 3. pair diag ($SECONDS s)"
PYTHONPATH=$DG timeout 10 python3 -P $C/pair_diag.py > $OUT/diag.log 2>&1
echo "diag rc $? ($SECONDS s)"
head -60 $OUT/diag.log | cut -c1-220
wait $TPID
echo "== 1. tests: $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
grep -E "tests rc|passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
wait $NPID
echo "== 2. ncu ($SECONDS s)"
tail -3 $OUT/ncu.log | cut -c1-200
$NCU --import $OUT/ncu.ncu-rep --page raw --csv --print-metric-instances values > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
python3 - $OUT/ncu_raw.csv <<'PY'
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 3:
    sys.exit(print("no ncu rows"))
hdr, data = rows[0], [r for r in rows[2:] if len(r) == len(rows[0])]
pat = (r"^(gpu__time|sm__cycles_elapsed\.avg$|smsp__inst_executed|sm__inst_executed_pipe_uniform|smsp__issue_active|"
       r"lts__t_bytes|dram__bytes_read|l1tex__data_pipe|sm__throughput|gpc__cycles_elapsed\.max|sm__pipe_tensor)")
keep = [i for i, h in enumerate(hdr) if re.search(pat, h)]
name = hdr.index("Kernel Name") if "Kernel Name" in hdr else None
print("| metric | " + " | ".join((r[name][:40] if name is not None else "k") for r in data) + " |")
print("|---|" + "---:|" * len(data))
for i in keep:
    print(f"| {hdr[i]} ({rows[1][i]}) | " + " | ".join(r[i] for r in data) + " |")
PY
echo "== end ($SECONDS s)"
