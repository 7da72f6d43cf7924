#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reference logits of an HF checkpoint directory for given token ids (hf_reference.py).

Llama, Qwen2, Mistral without a sliding window and GPT-2 are computed in float32, the issue-42
families (families_reference.py) in float64, from the stored (rounded) F32/F16/BF16 values.
Writes the logits [B, T, V] as raw little-endian float32 in C order to --out and prints
{"shape": [B, T, V]} on stdout. Run with /usr/bin/python3.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import UsageError, load_model_dir, max_positions, run_main, vocab_size  # noqa: E402


def parse_ids(text):
    rows = []
    for r, row in enumerate(text.split(";")):
        items = [s.strip() for s in row.split(",")]
        if not row.strip() or any(not s for s in items):
            raise UsageError("--ids row %d is empty or has an empty item: %r" % (r, row))
        try:
            rows.append([int(s, 10) for s in items])
        except ValueError:
            raise UsageError("--ids row %d: not a comma-separated list of integers: %r" % (r, row))
    lengths = {len(r) for r in rows}
    if len(lengths) != 1:
        raise UsageError("--ids rows have different lengths %s; all rows must be equally long"
                         % [len(r) for r in rows])
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="HF checkpoint directory")
    p.add_argument("--ids", required=True, help='token ids, rows separated by ";", e.g. "1,2,3;4,5,6"')
    p.add_argument("--out", required=True, help="output file: float32 LE logits [B,T,V]")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    rows = parse_ids(a.ids)
    model, config = load_model_dir(a.model)
    V = vocab_size(config)
    flat = [x for r in rows for x in r]
    if min(flat) < 0 or max(flat) >= V:
        raise UsageError("token id out of range [0, %d): min %d, max %d" % (V, min(flat), max(flat)))
    P = max_positions(config)
    if P is not None and len(rows[0]) > P:
        raise UsageError("sequence length %d exceeds the model's %d positions" % (len(rows[0]), P))
    ids = torch.tensor(rows, dtype=torch.int64)
    with torch.inference_mode():
        logits = model(ids).float()
    arr = np.ascontiguousarray(logits.numpy(), dtype="<f4")
    if not np.isfinite(arr).all():
        raise UsageError("non-finite logits")
    with open(a.out, "wb") as f:
        f.write(arr.tobytes())
    print(json.dumps({"shape": list(arr.shape)}))
    return 0


if __name__ == "__main__":
    run_main(main)
