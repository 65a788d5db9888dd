# fwd19 run scripts' common setup, sourced by run.sh / run2.sh / run3.sh from the root of main's tree: main18's wheel
# against the branch's (tools/hstu_dev/carry_setup.sh, carried beside this file), J = fwd19_jag.py (carried with
# fwd17_jag.py in jag/).
NAME=fwd19 BASE=main18
for f in "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh "$(dirname "${BASH_SOURCE[0]}")"/../carry_setup.sh; do
  [ -f "$f" ] && source "$f" && break
done
J=$C/jag/fwd19_jag.py
