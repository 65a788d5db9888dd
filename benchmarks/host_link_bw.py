"""The host link's copy bandwidth (issue 32): what the uva store's row moves are bounded by. Plain torch copies of
a pinned host buffer (``--mb``, 64 MB by default) to and from the device on the copy engines: host -> device,
device -> host, and both at once on two streams (the link's two directions: the staging's victims' rows go out
while the stored rows come in). Also prints the GPU's NUMA node and the nodes this process may allocate on (pinned
rows on the far socket of a two-socket host cross the socket link as well).

Usage: python benchmarks/host_link_bw.py [--mb 64] [--reps 20]
Skips (exit 0) without a GPU.
"""

from __future__ import annotations

import argparse
import os

import torch


def numa_lines():
    out = []
    try:
        bus = torch.cuda.get_device_properties(0).pci_bus_id.lower()
        dom, rest = bus.split(":", 1)
        path = f"/sys/bus/pci/devices/{dom[-4:]}:{rest}/numa_node"
        with open(path) as f:
            out.append(f"GPU {bus}: NUMA node {f.read().strip()}")
    except (AttributeError, OSError, ValueError) as e:
        out.append(f"GPU NUMA node: unknown ({type(e).__name__})")
    try:
        nodes = sorted(d for d in os.listdir("/sys/devices/system/node") if d.startswith("node"))
        out.append(f"host NUMA nodes: {', '.join(nodes)}")
        with open("/proc/self/status") as f:
            out += [ln.strip() for ln in f if ln.startswith(("Mems_allowed_list", "Cpus_allowed_list"))]
    except OSError:
        pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no GPU: skipped")
        return
    n = a.mb << 20
    host_a = torch.empty(n, dtype=torch.uint8, pin_memory=True).random_(0, 255)
    host_b = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dev_a = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dev_b = torch.empty(n, dtype=torch.uint8, device="cuda")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

    def timed(fn):
        fn()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(a.reps):
            fn()
        # both side streams joined into the current one before the end event
        torch.cuda.current_stream().wait_stream(s1)
        torch.cuda.current_stream().wait_stream(s2)
        e1.record()
        torch.cuda.synchronize()
        return e0.elapsed_time(e1) / a.reps

    def h2d():
        dev_b.copy_(host_a, non_blocking=True)

    def d2h():
        host_b.copy_(dev_a, non_blocking=True)

    def both():
        cur = torch.cuda.current_stream()
        s1.wait_stream(cur)
        s2.wait_stream(cur)
        with torch.cuda.stream(s1):
            dev_b.copy_(host_a, non_blocking=True)
        with torch.cuda.stream(s2):
            host_b.copy_(dev_a, non_blocking=True)

    print(f"GPU: {torch.cuda.get_device_name()}, pinned host buffer {a.mb} MB, torch copies, GB/s (1e9 B/s)")
    for ln in numa_lines():
        print(ln)
    print("| direction | ms per copy | GB/s |")
    print("|---|---:|---:|")
    for name, fn, nbytes in (("host -> device", h2d, n), ("device -> host", d2h, n),
                             ("both at once (sum)", both, 2 * n)):
        ms = timed(fn)
        print(f"| {name} | {ms:.3f} | {nbytes / ms / 1e6:.1f} |")
    assert torch.equal(host_b[:4096], dev_a[:4096].cpu()) and torch.equal(dev_b[:4096].cpu(), host_a[:4096])


if __name__ == "__main__":
    main()
