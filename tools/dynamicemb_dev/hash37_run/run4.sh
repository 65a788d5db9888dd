#!/bin/bash
# hash37 run 4 (issue 35; prepared, not run unless the lead has device time left): is the load-1.0 insert pass bound by
# its L2 requests or by its chains' latency? Lab value 5 (noprefetch.patch on 6b1a1b76) = main's path without the
# bucket's L2 prefetch before the lock: 9 L2 requests fewer per evicting key (a quarter of the pass's), but the scan
# under the lock reads DRAM instead of L2 (a longer chain). Request-bound: the insert pass -3 to -8 %; latency-bound:
# +5 to +10 %. Interleaved with 3 (main's path) in one process; same checksums required; ncu requests and stalls.
# Pack: PATCH=noprefetch.patch bash tools/dynamicemb_dev/hash37_run/pack.sh 4
B=53
. .carry/hash37/common.sh
eb uniform 11 26 20 5 - uniform 1 - 3,5
eb zipf 8 26 20 4 - zipf 1 - 3,5
eb dupnew 8 26 20 4 - dupnew 1 - 3,5
eb loads 8 26 20 4 - uniform 0.75,1 - 3,5
digest uniform zipf dupnew loads
ncu_raw raw 3,5 2
ncu_units units 3,5 2
echo "total: $(( $(date +%s) - t0 )) s"
