# bwd27's run scripts' common part (issue 39, session 24), sourced from the root of main's tree on the device: bwd28's
# setup (the carry's setup28.sh, else main's tree's bwd28_run/setup.sh) with NAME=bwd27, BASE=main27: runlib's
# common.sh (OUT, R (the tree), C (the carry folder .carry/bwd27), left (seconds to the script's LIM, default 48), the
# branch's wheel in /tmp/site_bwd27 (and with MAIN=1 main27's in /tmp/site_bwd27_main), GPU (name and clocks),
# gpu_tests (the branch's test files in $C/tree, -v, into $OUT/tests.log)), B21, digest.
NAME=bwd27 BASE=main27
SETUP28="$(dirname "${BASH_SOURCE[0]}")/setup28.sh"
[ -f "$SETUP28" ] || SETUP28=$PWD/tools/hstu_dev/bwd28_run/setup.sh
source "$SETUP28"
