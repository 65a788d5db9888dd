#!/bin/bash
# split40 run 1 (lead, session 37): the split's fault at D = 128 located. main40's wheel; diag_locate.py's modes
# (plain / launch / regrad / sync: what between the forward and the backward decides it), forced 2-tile chunks,
# the default (cfg 0) as control, then compute-sanitizer memcheck and initcheck on two runs.
set -u
export PYTHONUNBUFFERED=1
C=$(cd "$(dirname "$0")" && pwd)
S=/tmp/site_main
[ -d $S/hstu_attn ] || python3 -m pip install -q --no-deps --no-index --no-compile --target $S \
    .carry/main40/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
X="env PYTHONPATH=$S python3 -P $C/diag_locate.py"
timeout 22 $X plain,launch,regrad,sync 60
timeout 8 $X plain 60 14 2
timeout 6 $X plain 40 0
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "sanitizer: $SAN ($SECONDS s)"
timeout 9 $SAN --tool memcheck --print-limit 5 $X plain 2 2>&1 | grep -v "^=========  *$" | tail -8
timeout 9 $SAN --tool initcheck --print-limit 5 $X plain 2 2>&1 | grep -v "^=========  *$" | tail -8
echo "done at $SECONDS s"
