#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Baseline: the plain PyTorch eager perplexity loop, Hugging Face style, on the CPU.

Non-overlapping windows of --context tokens (the hf-sliding loop with stride = context: windows
[0, C), [C, 2C), ...; the last may be shorter), --batch full windows per forward (the last batch
may be smaller; a shorter tail window runs as its own forward, a one-token tail is skipped), under
torch.inference_mode(), model = the hf_reference module in float32. The loss is
F.cross_entropy(logits[:, :-1], ids[:, 1:], reduction="sum") in float32 (the first token of each
window is not scored), accumulated over batches in float64. One batch is run as a warm-up before
the timed loop (which then covers all windows, the first batch included).

Prints JSON on stdout:
  tokens_per_second         input tokens processed (sum of window lengths) / seconds
  scored_tokens_per_second  tokens_scored / seconds
  tokens_processed, tokens_scored, windows, ppl = exp(sum NLL / tokens_scored), seconds (timed loop),
  threads, blas (BLAS part of torch.__config__.show() + the BLAS library actually loaded), torch.
Run with /usr/bin/python3 (Debian's python3-torch).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "agent", "reference"))
from ref_common import (UsageError, blas_summary, load_model_dir, max_positions, read_tokens,  # noqa: E402
                        run_main, vocab_size)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--model", required=True, help="HF checkpoint directory")
    p.add_argument("--tokens", help=".u32 / .u16 (raw little-endian) or .npy token file")
    p.add_argument("--text", help="text file; its UTF-8 bytes are the token ids")
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--max-windows", type=int, default=None, help="only the first K windows")
    a = p.parse_args(argv)
    if a.context < 2 or a.batch < 1 or a.threads < 1:
        raise UsageError("need --context >= 2, --batch >= 1, --threads >= 1")
    if a.max_windows is not None and a.max_windows < 1:
        raise UsageError("--max-windows must be >= 1")
    torch.set_num_threads(a.threads)

    ids = torch.from_numpy(read_tokens(a.tokens, a.text))
    model, config = load_model_dir(a.model)
    V = vocab_size(config)
    if len(ids) < 2:
        raise UsageError("need at least 2 tokens")
    if int(ids.max()) >= V:
        raise UsageError("token id %d out of range for vocab_size %d" % (int(ids.max()), V))
    P = max_positions(config)
    if P is not None and a.context > P:
        raise UsageError("--context %d exceeds the model's %d positions" % (a.context, P))

    # hf-sliding with stride = C: windows [k*C, min((k+1)*C, n)); a one-token tail scores nothing.
    n = len(ids)
    starts = [b for b in range(0, n, a.context) if min(b + a.context, n) - b >= 2]
    if a.max_windows is not None:
        starts = starts[:a.max_windows]
    full = [b for b in starts if b + a.context <= n]
    tail = [b for b in starts if b + a.context > n]
    batches = [torch.stack([ids[b:b + a.context] for b in full[i:i + a.batch]])
               for i in range(0, len(full), a.batch)]
    batches += [ids[b:n].unsqueeze(0) for b in tail]

    def run(x):
        logits = model(x)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), x[:, 1:].reshape(-1),
                               reduction="sum")

    with torch.inference_mode():
        run(batches[0])  # warm-up
        nll = 0.0
        scored = 0
        t0 = time.perf_counter()
        for x in batches:
            nll += float(run(x))
            scored += x.shape[0] * (x.shape[1] - 1)
        seconds = time.perf_counter() - t0
    processed = sum(x.numel() for x in batches)
    print(json.dumps({
        "tokens_per_second": processed / seconds,
        "scored_tokens_per_second": scored / seconds,
        "tokens_processed": processed,
        "tokens_scored": scored,
        "windows": len(starts),
        "ppl": math.exp(nll / scored),
        "seconds": seconds,
        "threads": torch.get_num_threads(),
        "context": a.context,
        "batch": a.batch,
        "blas": blas_summary(),
        "torch": torch.__version__,
    }))
    return 0


if __name__ == "__main__":
    run_main(main)
