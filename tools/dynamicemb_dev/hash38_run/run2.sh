#!/bin/bash
# hash38 run 2 (issue 35). Run 1 (call 1): the staged scan (lab 4) ran only under ncu (a launch bug: the dynamic
# shared-memory attribute was set for the first staged kernel only, so the other launches failed), where it was
# +10 % slower than main's wide scan (425 vs 387 us) with 14 % fewer L2 requests (tag lookups 51 -> 40 % of peak) and
# +44 % warp instructions (the lanes polling the mbarrier). Here, with the launch fixed (evict_bench lab values):
# 3 = main's path; 4 = staged (fence.proxy.async.global + bulk copies + polling); 5 = 4 without the proxy fence
# (timing only); 6 = main's without the bucket's L2 prefetch (hash37's prepared run 4: request- vs latency-bound);
# 7 = 5 with the wait's suspend-time hint (no polling). Uniform / Zipf / dupnew / loads 0.5-1, then ncu raw + units.
B=54
. .carry/hash38/common.sh
eb uniform 12 26 20 7 - uniform 1 - 3,4,5,6,7
eb zipf 8 26 20 5 - zipf 1 - 3,4,6,7
eb dupnew 8 26 20 5 - dupnew 1 - 3,4,6
eb loads 10 26 20 4 - uniform 0.5,0.75,1 - 3,4,6
digest uniform zipf dupnew loads
ncu_raw raw 3,4,5,6,7 5
ncu_units units 3,4,5,6,7 5
echo "total: $(( $(date +%s) - t0 )) s"
