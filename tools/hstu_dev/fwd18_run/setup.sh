# fwd18 run scripts' common setup, sourced by run.sh / run2.sh / run3.sh from the root of main's tree: main17's wheel
# against the branch's (tools/hstu_dev/carry_setup.sh, carried beside this file), J = fwd17_jag.py (carried).
NAME=fwd18 BASE=main17
for f in "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh "$(dirname "${BASH_SOURCE[0]}")"/../carry_setup.sh; do
  [ -f "$f" ] && source "$f" && break
done
J=$C/fwd17_jag.py
