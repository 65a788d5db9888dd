"""Serving loop of an HSTU ranking model with a paged KV cache: returning users' histories are computed once,
their candidates are scored against the cached history, new history items are appended.

    python examples/hstu_serving.py                 # tiny model, CPU or GPU (whichever is there)
    python examples/hstu_serving.py --device cuda --layers 4 --heads 4 --dim 128 --batch 8 --steps 20

Each step: a batch of users (some returning, some new) sends its new history items and candidates; the cache
manager looks the users up, evicts least-recently-used users when the pool is full and hands every layer a page
table; every layer runs `hstu_attn.cached_hstu_attention`. The first steps are checked against the same model run
without a cache over the users' whole histories.
"""

import argparse
import random
import time

import torch

import hstu_attn


class TinyHSTU(torch.nn.Module):
    """HSTU layers (LayerNorm -> uvqk projection + SiLU -> attention -> LayerNorm(attn) * u -> projection, residual);
    `attend(layer, q, k, v)` is the attention, so the same weights run cached and uncached."""

    def __init__(self, layers, heads, dim):
        super().__init__()
        self.h, self.d = heads, dim
        width = heads * dim
        self.norm = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(layers))
        self.uvqk = torch.nn.ModuleList(torch.nn.Linear(width, 4 * width) for _ in range(layers))
        self.attn_norm = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(layers))
        self.out = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.score = torch.nn.Linear(width, 1)

    def forward(self, x, attend):
        for l in range(len(self.uvqk)):
            u, v, q, k = torch.nn.functional.silu(self.uvqk[l](self.norm[l](x))).chunk(4, dim=-1)
            shape = (-1, self.h, self.d)
            a = attend(l, q.reshape(shape).contiguous(), k.reshape(shape).contiguous(), v.reshape(shape).contiguous())
            x = x + self.out[l](self.attn_norm[l](a.reshape(x.shape)) * u)
        return x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--dim", type=int, default=32, help="head dim (32, 64, 128 or 256 on CUDA)")
    ap.add_argument("--batch", type=int, default=4, help="users per step")
    ap.add_argument("--users", type=int, default=10, help="distinct users that come and go")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--page-size", type=int, default=16, choices=hstu_attn.PAGE_SIZES)
    ap.add_argument("--pages", type=int, default=24, help="pages in the pool (small: eviction happens)")
    ap.add_argument("--max-history", type=int, default=96, help="tokens a user may keep in the cache")
    ap.add_argument("--candidates", type=int, default=4, help="candidates per user per step (at most)")
    ap.add_argument("--check-steps", type=int, default=3, help="steps checked against the uncached model")
    args = ap.parse_args(argv)

    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() and
                          hstu_attn.library_loaded() else ("cpu" if args.device == "auto" else args.device))
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float64
    rng = random.Random(0)
    torch.manual_seed(0)
    model = TinyHSTU(args.layers, args.heads, args.dim).to(device, dtype).eval()
    width = args.heads * args.dim
    ps = args.page_size
    cache = hstu_attn.KVCacheManager(args.layers, args.heads, args.dim, num_pages=args.pages, page_size=ps,
                                     max_users=max(args.users // 2, args.batch), dtype=dtype, device=device,
                                     max_pages_per_user=(args.max_history + ps - 1) // ps)
    scaling = float(args.max_history + 2 * args.candidates)  # one P·V divisor for cached and uncached runs
    history = {}  # user -> its history item embeddings so far (for the uncached check only)
    worst = 0.0
    start = time.perf_counter()
    for it in range(args.steps):
        users = rng.sample(range(args.users), args.batch)
        # New history items since the user's last visit (nothing cached for a user seen the first time means its
        # whole history arrives now), then candidates. Keep the total under the user's page budget.
        room = [args.max_history - sum(h.shape[0] for h in history.get(u, [])) for u in users]
        n_hist = [rng.randint(0, max(min(r, 24), 0)) for r in room]
        n_cand = [rng.randint(1, args.candidates) for _ in users]
        hist = [torch.randn(n, width, device=device, dtype=dtype) for n in n_hist]
        cand = [torch.randn(n, width, device=device, dtype=dtype) for n in n_cand]
        x = torch.cat([torch.cat((h, c)) for h, c in zip(hist, cand)])
        new = [a + b for a, b in zip(n_hist, n_cand)]
        cu = torch.tensor([0] + new, device=device).cumsum(0).to(torch.int32)
        num_targets = torch.tensor(n_cand, dtype=torch.int32, device=device)
        with torch.no_grad():
            step = cache.begin_step(torch.tensor(users, device=device), cu,
                                    torch.tensor(n_hist, dtype=torch.int32, device=device), x.shape[0], max(new),
                                    max_append=sum(n_hist))  # appends move only the new history rows
            out = model(x, lambda l, q, k, v: hstu_attn.cached_hstu_attention(
                cache, step, l, q, k, v, max(new), num_targets=num_targets, window_size=(-1, 0),
                scaling_seqlen=scaling))
            scores = model.score(out).squeeze(-1)
        cache.check()  # a synchronization: in production, check every few steps or off the serving path
        best = [int(scores[int(cu[b + 1]) - n_cand[b]: int(cu[b + 1])].float().argmax()) for b in range(len(users))]
        evicted = [u for u in history if u not in users and int(cache.cached_lengths(
            torch.tensor([u], device=device))) == 0]
        for u in evicted:  # the cache dropped them; a returning evicted user sends its whole history again
            history.pop(u)
        if it < args.check_steps:
            full = [torch.cat(history.get(u, []) + [h, c]) for u, h, c in zip(users, hist, cand)]
            lens = [f.shape[0] for f in full]
            cuf = torch.tensor([0] + lens, device=device).cumsum(0).to(torch.int32)
            with torch.no_grad():
                ref = model(torch.cat(full), lambda l, q, k, v: hstu_attn.hstu_attn_varlen_func(
                    q, k, v, cuf, cuf, max(lens), max(lens), None, num_targets, 1, (-1, 0),
                    scaling_seqlen=scaling))
            rows = torch.cat([torch.arange(int(cuf[b + 1]) - n, int(cuf[b + 1])) for b, n in enumerate(new)])
            worst = max(worst, (out.float() - ref[rows.to(device)].float()).abs().max().item())
        for u, h in zip(users, hist):
            history.setdefault(u, []).append(h)
        print(f"step {it}: users {users} cached {step.cached_lens.tolist()} new {new} best candidate {best} "
              f"free pages {cache.num_free_pages()}")
    elapsed = time.perf_counter() - start
    print(f"hstu serving on {device} ({dtype}): {args.steps} steps of {args.batch} users, {args.layers} layers, "
          f"H{args.heads} D{args.dim}, page size {ps}: {elapsed * 1e3 / args.steps:.1f} ms per step (incl. checks)")
    print(f"max |cached - uncached| over the first {min(args.check_steps, args.steps)} steps: {worst:.3e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
