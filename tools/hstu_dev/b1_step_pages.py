"""The 2 MB pages (address >> 21) that the NVIDIA batch-1 cached step's head and first layer touch (issue 34): the
step of hstu_inference.py's cached_setup captured as a CUDA graph (the addresses are the graph's), its tensors
recorded during the capture. Sets: begin_step's (the slot tables, the batch's inputs, the step tensors it writes),
the first layer's small tensors (the step plan, the page table, q / k / v, the output), the first layer's pool pages
(those of the user's cache pages). Prints each set's distinct pages and the pages they share, per
KVCacheManager variant (b1_step_bench.py's names).

    python tools/hstu_dev/b1_step_pages.py --variants default
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _d in (os.path.join(os.getcwd(), "benchmarks"), os.path.join(ROOT, "benchmarks"),
           os.path.join(os.getcwd(), "tools", "hstu_dev"), os.path.dirname(os.path.abspath(__file__))):
    if os.path.isdir(_d):
        sys.path.insert(0, _d)

STATE = ("slot_user", "slot_valid", "slot_len", "slot_pages", "last_used", "free_pages", "free_count", "clock",
         "error_flags")


def tensors_of(obj, prefix: str):
    """(name, tensor) of every tensor field of a dataclass (one level down into dataclasses, tuples and dicts)."""
    out = []
    if isinstance(obj, torch.Tensor):
        return [(prefix, obj)]
    if dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            if f.name == "src_rows" and f.name not in obj.__dict__:
                continue  # (made on demand: not read by the Hopper step)
            out += tensors_of(getattr(obj, f.name, None), f"{prefix}.{f.name}")
    elif isinstance(obj, (tuple, list)):
        for i, x in enumerate(obj):
            out += tensors_of(x, f"{prefix}[{i}]")
    elif isinstance(obj, dict):
        for k, x in obj.items():
            out += tensors_of(x, f"{prefix}[{k!r}]")
    return out


def pages_of(t: torch.Tensor):
    if t.numel() == 0:
        return set()
    lo = t.data_ptr()
    hi = lo + (t.numel() - 1) * t.element_size()  # (contiguous tensors: the span)
    return set(range(lo >> 21, (hi >> 21) + 1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="the 2 MB pages of the batch-1 step's head and first layer")
    ap.add_argument("--variants", default="default")
    ap.add_argument("--label", default="?")
    args = ap.parse_args(argv)
    if torch.cuda.is_available():
        import hstu_inference as hi
        from b1_step_bench import b1_variant
        from bench_util import capture_graph

        import hstu_attn
    else:
        print("b1_step_pages: no CUDA GPU, skipped")
        return 0

    dev = torch.device("cuda")
    print("| wheel | variant | set | tensors | distinct 2 MB pages | pages |")
    print("|---|---|---|---|---|---|")
    for var in args.variants.split(","):
        case = b1_variant(hi, var, dev, torch.bfloat16)
        if case is None:
            continue
        sh, cache, restore, (users, cu_q, app, q, k, v), tgt = case
        B = sh.batch
        seen = {}

        def step():
            s = cache.begin_step(users, cu_q, app, B * sh.new, sh.new)
            seen["begin"] = [(n, getattr(cache, n)) for n in STATE] + [("user_ids", users), ("cu_q", cu_q),
                                                                       ("num_append", app)] + tensors_of(s, "step")
            for l in range(sh.layers):
                o = hstu_attn.cached_hstu_attention(cache, s, l, q[l], k[l], v[l], sh.new, num_targets=tgt,
                                                    scaling_seqlen=float(sh.history + sh.candidates))
                if l == 0:
                    seen["layer0"] = tensors_of(s.layout.kernel_plans, "plan") + [
                        ("page_offsets", s.page_offsets), ("page_ids", s.page_ids), ("cached_lens", s.cached_lens),
                        ("cu_k", s.layout.cu_seqlens_k), ("tgt", tgt), ("q", q[0]), ("k", k[0]), ("v", v[0]),
                        ("out", o)]
                    seen["ids"] = s.page_ids

        restore()
        g = capture_graph(step)
        restore()
        g.replay()
        torch.cuda.synchronize()
        pool0 = cache.layer_cache(0)
        page_bytes = pool0[0].numel() * pool0.element_size()
        ids = sorted(set(seen["ids"].cpu().tolist()))
        pool_pages = {(pool0.data_ptr() + i * page_bytes) >> 21 for i in ids}
        sets = {}
        for key in ("begin", "layer0"):
            pg = set()
            for _, t in seen[key]:
                pg |= pages_of(t)
            sets[key] = pg
        sets["layer0 pool"] = pool_pages
        for key, pg in sets.items():
            n = len(seen[key]) if key in seen else len(ids)
            shown = ", ".join(f"{p:#x}" for p in sorted(pg)[:24])
            print(f"| {args.label} | {var} | {key} | {n} | {len(pg)} | {shown} |")
        both = sets["begin"] & sets["layer0"]
        print(f"| {args.label} | {var} | begin & layer0 | | {len(both)} | |")
        print(f"| {args.label} | {var} | begin - layer0 (only the head) | | {len(sets['begin'] - sets['layer0'])} | |")
        per = {}
        for n, t in seen["begin"]:
            per.setdefault(min(pages_of(t) or {0}), []).append(n)
        print(f"<!-- {args.label} {var} begin_step's tensors by page: " +
              "; ".join(f"{p:#x}: {', '.join(ns)}" for p, ns in sorted(per.items())) + " -->")
        del g, cache
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
