# Sourced by step38's runK.sh (copied with them into .carry/step38/, run from main's tree root on the device): main's
# dynamicemb wheel (.carry/main38/whl) in /tmp/site_m38s, this branch's (when packed) in /tmp/site_step38; main's
# tests with this branch's test files over them in /tmp/t38; the branch's tools on the path. SM: the site a run uses
# ($S when the branch's wheel is there, else main's); `left`: seconds left of the budget $B (from t0).
t0=$(date +%s)
set -u
export PYTHONUNBUFFERED=1
C=.carry/step38
M=/tmp/site_m38s S=/tmp/site_step38
mkdir -p "$OUT"
rm -rf $M $S /tmp/t38
python3 -m pip install -q --no-deps --no-index --no-compile --target $M .carry/main38/whl/dynamicemb-*.whl 2>&1 | grep -v WARN | tail -2
SM=$M
if ls $C/whl/dynamicemb-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/dynamicemb-*.whl 2>&1 | grep -v WARN | tail -2
  SM=$S
fi
mkdir -p /tmp/t38 && cp -r tests /tmp/t38/ && cp -r $C/tree/tests/dynamicemb/*.py /tmp/t38/tests/dynamicemb/ 2>/dev/null
TOOLS=$C/tree/tools/dynamicemb_dev
PT="python3 -P -m pytest -q -p no:cacheprovider --tb=short --maxfail=4 -rfE"
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
