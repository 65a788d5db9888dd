"""One forward per listed case of the portable HSTU kernel (kernel_options(sm90=False, fwd_sm80_cfg=cfg)), for ncu
(branch fwd17, issue 39): ncu -k regex:"hstu_fwd_kernel|flash_fwd" ... python3 prof17.py CFG
Cases in order: Zipf(1.2) B32 D256 ctx3, dense B2 S1820 D256 ctx3, B16 S4K D256 causal, B16 S4K D256 ctx64,
B256 S256 D256, then FA2's B256 S256 D256."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fwd17_jag import fa2, ours, zipf_lengths  # noqa: E402

cfg = int(sys.argv[1]) if len(sys.argv) > 1 else 0
jag = zipf_lengths(32, 4096)
for lens, D, kw in ((jag, 256, {"ctx": 3}), ([1820] * 2, 256, {"ctx": 3}), ([4096] * 16, 256, {}),
                    ([4096] * 16, 256, {"ctx": 64}), ([256] * 256, 256, {})):
    ours(lens, D, cfg, **kw)()
    torch.cuda.synchronize()
fa2(256, 256, 256)()
torch.cuda.synchronize()
print("prof17 done", torch.cuda.get_device_name())
