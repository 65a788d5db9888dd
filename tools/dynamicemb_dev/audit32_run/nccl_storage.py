"""audit32 run 3 (issue 32; needs >= 2 GPUs, nvidia-h200-x2): the sharded path in every storage mode over NCCL,
one process per GPU: shard_workers.storage_parity (hybrid and caching shards against the single-rank all-HBM
module) and its storage_modes_bitwise (hybrid, caching over the host, uva and disk stores, each rank's disk store
in <dir>/rank<r>-of-<W>, equal to the sharded all-HBM module bit for bit). Added to the NCCL suite at 330445b and
never run there since (no 2-GPU call after it). Prints one line per world size.

    python3 nccl_storage.py TESTS_DIR [WORLD ...]
"""

import importlib.util
import sys
import tempfile
import time

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402

import shard_workers as sw  # noqa: E402
from dist_helpers import run_ranks  # noqa: E402

if __name__ == "__main__":  # (the ranks are spawned: they import this file as a module)
    worlds = [int(w) for w in sys.argv[2:]] or [2]
    disk = "with" if importlib.util.find_spec("rocksdict") is not None else "without (no rocksdict)"
    for w in worlds:
        if torch.cuda.device_count() < w:
            print(f"world {w}: skipped ({torch.cuda.device_count()} GPUs)")
            continue
        t0 = time.time()
        with tempfile.TemporaryDirectory() as d:
            try:
                run_ranks(sw.storage_parity, w, d, backend="nccl", timeout=40)
                print(f"world {w}: storage_parity + storage_modes_bitwise {disk} the disk store: passed in "
                      f"{time.time() - t0:.1f} s")
            except AssertionError as e:
                print(f"world {w}: FAILED in {time.time() - t0:.1f} s\n{str(e)[-3000:]}")
