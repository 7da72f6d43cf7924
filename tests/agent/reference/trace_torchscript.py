#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Saves an HF checkpoint directory (hf_reference, float32) as a TorchScript module.

The module maps int64 token ids [B, T] to float32 logits [B, T, V]. It is made with torch.jit.trace
on a seeded random example of shape [--batch, --length], then reloaded from disk and checked
against the eager module on a second random input of the same shape and on other shapes (smaller
T, B = 1, larger B/T within the model's positions). Prints JSON: the file, the traced shape and, per
tested shape, whether the reloaded module accepted it and the max |difference| to eager. Exits
non-zero when the traced shape itself does not reproduce the eager logits (max |diff| > --tol).
Run with /usr/bin/python3.
"""
import argparse
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import UsageError, load_model_dir, max_positions, run_main  # noqa: E402


class Logits(torch.nn.Module):
    """ids [B, T] int64 -> logits [B, T, V] float32."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids).float()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="HF checkpoint directory")
    p.add_argument("--out", required=True, help="output .pt file")
    p.add_argument("--batch", type=int, required=True, help="B of the tracing example")
    p.add_argument("--length", type=int, required=True, help="T of the tracing example")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tol", type=float, default=1e-5, help="max |traced - eager| allowed")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    if a.batch < 1 or a.length < 1:
        raise UsageError("--batch and --length must be >= 1")
    model, config = load_model_dir(a.model)
    V = int(config["vocab_size"])
    P = max_positions(config)
    if P is not None and a.length > P:
        raise UsageError("--length %d exceeds the model's %d positions" % (a.length, P))
    g = torch.Generator().manual_seed(a.seed)
    example = torch.randint(0, V, (a.batch, a.length), generator=g, dtype=torch.int64)
    wrapped = Logits(model).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            traced = torch.jit.trace(wrapped, example, check_trace=True)
    tracer_warnings = sorted({str(w.message).splitlines()[0] for w in caught})
    torch.jit.save(traced, a.out)
    loaded = torch.jit.load(a.out, map_location="cpu").eval()

    limit = P if P is not None else max(2 * a.length, 64)
    shapes = [(a.batch, a.length), (1, a.length), (a.batch, max(1, a.length // 2)), (1, 1),
              (a.batch + 1, min(limit, a.length + 3))]
    checks = []
    ok_traced = False
    for i, (b, t) in enumerate(shapes):
        x = torch.randint(0, V, (b, t), generator=g, dtype=torch.int64)
        entry = {"shape": [b, t]}
        try:
            with torch.inference_mode():
                y = loaded(x)
                ref = wrapped(x)
            if tuple(y.shape) != (b, t, V):
                entry.update({"accepted": False, "error": "output shape %s" % (tuple(y.shape),)})
            else:
                diff = (y - ref).abs().max().item()
                entry.update({"accepted": True, "max_abs_diff": diff, "matches": diff <= a.tol})
                if i == 0:
                    ok_traced = diff <= a.tol
        except Exception as e:  # a traced module may reject shapes other than the example's
            entry.update({"accepted": False, "error": str(e).splitlines()[0][:200]})
        checks.append(entry)
    supported = [c["shape"] for c in checks if c.get("matches")]
    print(json.dumps({"out": os.path.abspath(a.out), "traced_shape": [a.batch, a.length], "vocab": V,
                      "max_positions": P, "checks": checks, "supported_shapes": supported,
                      "dynamic_shapes": len(supported) == len(checks), "tracer_warnings": tracer_warnings}))
    if not ok_traced:
        sys.stderr.write("error: the reloaded module does not reproduce the eager logits at the traced shape\n")
        return 1
    return 0


if __name__ == "__main__":
    run_main(main)
