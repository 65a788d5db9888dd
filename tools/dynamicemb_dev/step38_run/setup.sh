# Sourced by step38's runK.sh (copied with them into .carry/step38/, run from main's tree root on the device):
# runlib's overlay_setup.sh (carried beside it): main's dynamicemb wheel (.carry/main38/whl) in /tmp/site_m38s, this branch's
# (when packed) in /tmp/site_step38; main's tests with this branch's test files over them in /tmp/t38; the branch's
# tools on the path. SM: the site a run uses ($S when the branch's wheel is there, else main's); `left`: seconds
# left of the budget $B (from t0).
NAME=step38 BASE=main38 MSITE=/tmp/site_m38s TESTS=/tmp/t38
. "$(dirname "${BASH_SOURCE[0]}")/overlay_setup.sh"
