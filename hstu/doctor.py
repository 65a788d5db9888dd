"""Environment doctor for accelerated_modules: `python -m hstu_attn.doctor`.

Checks the GPU, its compute capability, the CUDA driver and runtime, the torch version, that both packages
import and register their ops, that the archs compiled into the wheels cover this GPU, and runs one tiny op
per package against its CPU twin. Prints a pass/fail table; exits 1 if anything failed.
"""

import importlib
import os
import sys
import traceback

from ._device_check import covers

PACKAGES = ("hstu_attn", "dynamicemb")


class _Report:
    def __init__(self):
        self.rows = []

    def add(self, check, ok, detail):
        status = "PASS" if ok is True else ("SKIP" if ok is None else "FAIL")
        self.rows.append((check, status, str(detail)))

    def run(self, check, fn):
        try:
            ok, detail = fn()
        except Exception as e:  # the doctor reports, it never crashes
            ok, detail = False, f"{type(e).__name__}: {e}"
        self.add(check, ok, detail)

    def render(self):
        w = max(len(r[0]) for r in self.rows)
        lines = [f"| {'check'.ljust(w)} | status | detail |", f"|{'-' * (w + 2)}|--------|--------|"]
        lines += [f"| {c.ljust(w)} | {s:<6} | {d} |" for c, s, d in self.rows]
        return "\n".join(lines)

    @property
    def failed(self):
        return any(r[1] == "FAIL" for r in self.rows)


def main(argv=None):
    r = _Report()
    import torch

    r.add("python", True, sys.version.split()[0])
    r.add("torch", tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 10),
          f"{torch.__version__} (needs >= 2.10)")
    cuda = torch.cuda.is_available()
    r.add("CUDA available", True if cuda else None, "yes" if cuda else "no GPU visible: GPU checks skipped")
    cap = None
    if cuda:
        cap = torch.cuda.get_device_capability()
        r.add("GPU", True, torch.cuda.get_device_name())
        r.add("compute capability", cap >= (8, 0), f"{cap[0]}.{cap[1]} (needs >= 8.0)")
        r.add("CUDA runtime (torch)", True, torch.version.cuda)
        try:
            import ctypes

            v = ctypes.c_int(0)
            ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
            drv = v.value
            rt = tuple(int(x) for x in (torch.version.cuda or "0.0").split(".")[:2])
            ok = (drv // 1000, (drv % 1000) // 10) >= rt
            r.add("CUDA driver", ok, f"{drv // 1000}.{(drv % 1000) // 10} (supports CUDA runtime up to this)")
        except OSError as e:
            r.add("CUDA driver", False, f"libcuda.so.1 not loadable: {e}")

    mods = {}
    for name in PACKAGES:
        def _imp(name=name):
            m = importlib.import_module(name)
            mods[name] = m
            here = os.path.dirname(m.__file__)
            so = os.path.join(here, "_C.so")
            if not os.path.exists(so):
                return False, f"{m.__version__} at {here}, but _C.so is missing (a source checkout?)"
            return hasattr(torch.ops, name), f"{m.__version__} at {here}"
        r.run(f"import {name}", _imp)
        if name not in mods:
            continue
        try:
            info = importlib.import_module(f"{name}._build_info")
            archs = [a for a in info.CUDA_ARCHS.split(",") if a]
        except ImportError:
            archs = []
        if cap is not None:
            r.add(f"{name} archs cover GPU", covers(archs, cap), f"built for {','.join(archs) or '?'}")
        else:
            r.add(f"{name} archs", None, f"built for {','.join(archs) or '?'}")

    if "dynamicemb" in mods:
        dyn = mods["dynamicemb"]

        def _hash():
            keys = torch.arange(-500, 500, dtype=torch.int64) * 7919
            cpu = dyn.hash_keys(keys)
            if not cuda:
                return True, "hash_keys on CPU"
            gpu = dyn.hash_keys(keys.cuda()).cpu()
            return torch.equal(cpu, gpu), "hash_keys CUDA == CPU on 1000 keys"
        r.run("dynamicemb tiny op", _hash)

    if "hstu_attn" in mods:
        h = mods["hstu_attn"]

        def _kernels():
            fn = getattr(h, "compiled_kernels", None)
            if fn is None:
                return None, "compiled_kernels() not available"
            info = fn()
            if not info.get("instances"):
                return False, f"no kernel units registered: {info}"
            names = info["instances"]
            hopper = [n for n in names if "_sm90_" in n]
            msg = f"{len(names)} units, sm80-class built for {info.get('archs')}, {len(hopper)} Hopper (sm_90a) units"
            if cuda and torch.cuda.get_device_capability() == (9, 0) and not hopper:
                msg += "; this GPU is sm90: a --config=sm90 build adds the faster Hopper forward"
            return True, msg
        r.run("hstu_attn compiled kernels", _kernels)

        def _attn():
            if not cuda:
                return None, "needs a GPU"
            torch.manual_seed(0)
            lens = torch.tensor([0, 5, 17, 64], dtype=torch.int32)
            cu = torch.zeros(len(lens) + 1, dtype=torch.int32)
            cu[1:] = torch.cumsum(lens, 0)
            total, heads, dim = int(cu[-1]), 2, 64
            q, k, v = (torch.randn(total, heads, dim, dtype=torch.bfloat16, device="cuda") for _ in range(3))
            out = h.hstu_attn_varlen_func(q, k, v, cu.cuda(), cu.cuda(), 64, 64, window_size=(-1, 0))
            ref = h.hstu_attn_varlen_func(q.cpu().float(), k.cpu().float(), v.cpu().float(), cu, cu, 64, 64,
                                          window_size=(-1, 0))
            err = (out.float().cpu() - ref).abs().max().item()
            return err < 2e-2, f"causal bf16 fwd, max |err| vs CPU reference = {err:.2e}"
        r.run("hstu_attn tiny op", _attn)

    print(r.render())
    print("\nall checks passed" if not r.failed else "\nsome checks FAILED")
    return 1 if r.failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(1)
