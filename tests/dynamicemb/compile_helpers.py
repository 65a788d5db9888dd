"""torch.compile of a dynamicemb training step against eager steps (test_compile_cpu.py on the CPU,
test_checks_gpu.py on CUDA): the module forward + loss compiled with fullgraph=True, its backward (the fused update)
run from the compiled graph."""

import torch


def loss(m, ids, offsets, w, R):
    out = m(ids, offsets, per_sample_weights=w)
    return out, (out * R).sum()


def step(fn, m, ids, offsets, w, R):  # the compiled forward + loss; its backward runs the compiled backward
    out, l = fn(m, ids, offsets, w, R)
    l.backward()
    return out.detach()


def assert_compiled_steps_match_eager(eager, compiled, backend, batches, rows, rtol, atol):
    """Trains `eager` (the loss run eagerly) and `compiled` (the loss under torch.compile with `backend`) on each
    (ids, offsets, per_sample_weights, R) of `batches`: each step's outputs, then rows(eager) and rows(compiled),
    must match within rtol / atol."""
    closs = torch.compile(loss, backend=backend, fullgraph=True)
    for ids, offsets, w, R in batches:
        want = step(loss, eager, ids, offsets, w, R)
        got = step(closs, compiled, ids, offsets, w, R)
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol)
    for a, b in zip(rows(eager), rows(compiled)):
        torch.testing.assert_close(b, a, rtol=rtol, atol=atol)
