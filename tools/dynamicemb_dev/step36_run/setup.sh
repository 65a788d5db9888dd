# Sourced by step36's runK.sh (copied with them into .carry/step36/, run from main's tree root on the device):
# runlib's overlay_setup.sh (carried beside it): main's dynamicemb wheel (.carry/main36/whl) in /tmp/site_main36, this branch's
# (when packed) in /tmp/site_step36; main's tests with this branch's test files over them in /tmp/t36; the branch's
# tools on the path. SM: the site a run uses ($S when the branch's wheel is there, else main's); `left`: seconds
# left of the budget $B (from t0).
NAME=step36 BASE=main36 MSITE=/tmp/site_main36 TESTS=/tmp/t36
. "$(dirname "${BASH_SOURCE[0]}")/overlay_setup.sh"
