# Sourced by step39's runK.sh (copied with them into .carry/step39/, run from main's tree root on the device): main's
# dynamicemb wheel (.carry/main39/whl) in /tmp/site_m39s, this branch's in /tmp/site_step39; main's tests with this
# branch's test files over them in /tmp/t39; the branch's tools on the path. SM: the branch's site (its lab bits
# reach main's code path: "-" / 817 is main's step), M: main's own wheel; `left`: seconds left of the budget $B.
t0=$(date +%s)
set -u
export PYTHONUNBUFFERED=1
C=.carry/step39
M=/tmp/site_m39s S=/tmp/site_step39
mkdir -p "$OUT"
rm -rf $M $S /tmp/t39
python3 -m pip install -q --no-deps --no-index --no-compile --target $M .carry/main39/whl/dynamicemb-*.whl 2>&1 | grep -v WARN | tail -2
SM=$M
if ls $C/whl/dynamicemb-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/dynamicemb-*.whl 2>&1 | grep -v WARN | tail -2
  SM=$S
fi
mkdir -p /tmp/t39 && cp -r tests /tmp/t39/ && cp -r $C/tree/tests/dynamicemb/*.py /tmp/t39/tests/dynamicemb/ 2>/dev/null
TOOLS=$C/tree/tools/dynamicemb_dev
PT="python3 -P -m pytest -q -p no:cacheprovider --tb=short --maxfail=4 -rfE"
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
