"""Issue 39's drab zeros by bulk copies (branch drab38): the sm80-class backward
(kernel_options(sm90=False)) of bf16 H4 B16 S4K causal, ms of the raw op hstu_attn::bwd_with_options, every case
of one head dim timed together (CUDA graphs of 4 calls, interleaved per round, median of --reps rounds: fwd17_jag.py's
timing).

A case: NAME[~cfg]
  causal | rab (rab of shape (B, H, S, S), q's dtype) | rab1 ((B, 1, S, S)) | rabd / rab1d (with has_drab)
  ~cfg: kernel_options(fwd_sm80_cfg=cfg): 12 main's rab loops (drab's zeros by 16-byte stores, not bulk copies),
  15 drab zeroed by the op (the rab loops storing only their walk's dS), 8 main's rab path before the rab loops

Usage: drab38_bench.py LABEL [--reps 5] [--dims 128 64 256] [--cases causal rabd rabd~12 rab rab~12]
       drab38_bench.py LABEL --ncu [--dims ...] [--cases ...]   (one call per case, no graphs)"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # (carried beside drab_bench.py)
sys.path.insert(0, os.path.join(HERE, ".."))
from drab_bench import main  # noqa: E402

if __name__ == "__main__":
    main("drab38", ["causal", "rabd", "rabd~12", "rab", "rab~12"])
