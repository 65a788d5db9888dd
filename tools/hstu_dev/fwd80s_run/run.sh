#!/bin/bash
# fwd80s (issue 39): the portable (sm80-class) forward: longest-first grid order over chunks of sequences (kernels
# over 128 registers) (run 2 also had a per-warp key range, reverted after it),
# the bf16 default from 512 mean rows (was 4,096) candidate 2, at D = 64 candidate 1 (2 K/V stages); candidates
# 1 (D128 now 64-key sub-tiles), 3 (64 x 64, 4 warps, 3 blocks / SM), 4 (2 + warp skip), 5 (D256 128 x 64, 8 warps).
# Branch wheel vs main's (ff9215e) in one call, on the H200:
#   run(command="bash .carry/fwd80s/run.sh", carry=[".carry/fwd80s", ".carry/whl"], timeout_s=200)
# 1. fwd_bits.py: outputs bitwise vs main's run of the same tiles (cfg 0 vs the tiles it picks, 1 at D64, 2, 6);
#    cfg 4 vs 2 (values)
# 2. GPU tests (branch): test_sm80_forward_gpu.py, test_kernels_gpu.py (portable forward paths)
# 3. fwd80s_time.py: the 5 shapes (+3 others) x cfgs + FA2, masks (ctx / targets): main, then branch
# <= 120 s; logs in $OUT (4 files); a digest at the end of stdout.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out_fwd80s}; mkdir -p "$OUT"
R=$PWD
C=$R/.carry/fwd80s
left() { echo $((118 - SECONDS)); }
rm -rf /tmp/site_fwd80s /tmp/site_fwd80s_main
timeout 25 python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fwd80s $C/hstu_attn-*.whl \
    2>&1 | grep -v WARNING | tail -2
timeout 25 python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fwd80s_main \
    $C/main/hstu_attn-*.whl 2>&1 | grep -v WARNING | tail -2
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
echo "== 1. fwd_bits ($SECONDS s)"
PYTHONPATH=/tmp/site_fwd80s_main timeout 25 python3 -P $C/fwd_bits.py dump /tmp/fwd80s_bits_main.pt > $OUT/bits.log 2>&1
echo "dump rc $? ($SECONDS s)" | tee -a $OUT/bits.log
PYTHONPATH=/tmp/site_fwd80s timeout 25 python3 -P $C/fwd_bits.py check /tmp/fwd80s_bits_main.pt >> $OUT/bits.log 2>&1
echo "check rc $? ($SECONDS s)" | tee -a $OUT/bits.log
PYTHONPATH=/tmp/site_fwd80s timeout 15 python3 -P $C/fwd_bits.py self x >> $OUT/bits.log 2>&1
echo "self rc $? ($SECONDS s)" | tee -a $OUT/bits.log
echo "== 2. GPU tests (branch) ($SECONDS s)"
cd $C
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=5 -rfE"
PYTHONPATH=/tmp/site_fwd80s timeout 40 $PT tests/hstu/test_sm80_forward_gpu.py tests/hstu/test_kernels_gpu.py \
    -k "(sm80 and (fwd or forward or mask or target or context)) or both_families or sm80_and_sm90" \
    > $OUT/tests.log 2>&1
echo "rc $? (124: time ran out; $SECONDS s)"
cd $R
for w in fwd80s_main fwd80s; do
  if [ "$(left)" -gt 8 ]; then
    echo "== 3. fwd80s_time ($w, $SECONDS s)" | tee -a $OUT/time.log
    CF="0 1 2 3 4 5 6"; [ $w = fwd80s_main ] && CF="0 1 2 6"
    PYTHONPATH=/tmp/site_$w timeout $(( $(left) > 60 ? 40 : $(left) - 2 )) python3 -P $C/fwd80s_time.py $w --reps 10 \
        --cfgs $CF --mask-cfgs $([ $w = fwd80s_main ] && echo 0 || echo 0 1 2) >> $OUT/time.log 2>&1
    echo "rc $? ($SECONDS s)" | tee -a $OUT/time.log
  fi
done
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### bitwise vs main"; grep -E "fwd_bits|DIFFERS|Error|rc " $OUT/bits.log | cut -c1-200 | head -16
echo "#### tests"; grep -E "^FAILED|^ERROR|passed|failed|skipped|rror" $OUT/tests.log | tail -8
echo "progress: $(grep -oE '^[.FsEx]+' $OUT/tests.log | tr -d '\n' | wc -c) tests run"
echo "#### fwd80s_time (main: cfg 0 / 1 / 2 / 6 only; its 1 at D128 has 32-key sub-tiles)"; grep -E "^###|^\| |rror|^rc" $OUT/time.log | cut -c1-200
