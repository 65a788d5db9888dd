"""Digest of hash_table.py --peer-hkv outputs (hkv38's runs): per dim, load and op ours (device / host clock) against
HKV, in 1e9 KV/s, and the ratios; then our Zipf rows. python3 digest.py OUT/dim32.txt ..."""
import re
import sys

for path in sys.argv[1:]:
    try:
        text = open(path).read()
    except OSError as e:
        print(f"# {path}: {e}")
        continue
    state = re.findall(r"HierarchicalKV: (.*?) in (\d+) s", text)
    print(f"# {path.split('/')[-1]}: HKV {state[-1][0] + ' ' + state[-1][1] + ' s' if state else 'not finished'}")
    side = text.split("vs HierarchicalKV", 1)[1] if "vs HierarchicalKV" in text else ""
    rows = [l for l in side.splitlines() if re.match(r"^\| \d+ \| \d+M \| [\d.]+ \| \w+ \| [\d.]", l)]
    for l in rows:  # | dim | cap | λ | op | dev | host | HKV | dev/HKV | host/HKV |
        c = [x.strip() for x in l.strip("|").split("|")]
        num = lambda s: s.split(" ")[0]
        print(f"{c[0]} {c[2]} {c[3][:16]:16s} dev {num(c[4])} host {num(c[5])} hkv {num(c[6])} {c[7]} {c[8]}")
    if not rows:  # cut short: the per-config lines
        for l in text.splitlines():
            if l.startswith("dim ") or l.startswith("hkv| |"):
                print(l[:230])
    for l in text.splitlines():
        if l.startswith("dim ") and "zipf" in l:
            print("zipf: " + l[:150])
