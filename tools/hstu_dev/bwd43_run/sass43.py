"""bwd43: whether ptxas put HMMAs among the SiLU's MUFU.TANH in D = 64's loop (cuobjdump -sass of one kernel each).

  python3 sass43.py LABEL SASS_FILE [LABEL SASS_FILE ...]
      per kernel: HMMA and MUFU.TANH counts, and how many TANHs have an HMMA within 6 instructions on either side
      (main's loop: only the S / dP GEMMs' edges; kPdsPipeS: the first half's TANHs among the second half's HMMAs)
"""
import sys


def digest(path):
    ops = []
    for ln in open(path):  # ("/*addr*/ [@P] OP ... ; /* encoding */"; the encoding's second line has no op)
        toks = ln.split("*/", 1)[1].split() if "*/" in ln else []
        toks = toks[1:] if toks and toks[0].startswith("@") else toks
        if toks and not toks[0].startswith("/*"):
            ops.append(toks[0])
    ops = [o.split(".")[0] if not o.startswith("MUFU") else o for o in ops]
    hmma = [i for i, o in enumerate(ops) if o == "HMMA"]
    tanh = [i for i, o in enumerate(ops) if o.startswith("MUFU.TANH")]
    hs = set(hmma)
    near = sum(1 for i in tanh if any(j in hs for j in range(i - 6, i + 7)))
    return len(ops), len(hmma), len(tanh), near


for label, path in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        n, h, t, near = digest(path)
        print(f"{label:6s} {n} instructions, {h} HMMA, {t} MUFU.TANH, {near} TANH with an HMMA within 6")
    except Exception as e:  # (cuobjdump found nothing)
        print(f"{label:6s} n/a ({str(e)[:80]})")
