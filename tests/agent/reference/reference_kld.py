#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reference comparison of a model with a reference model, token by token, as `eval --reference-model` reports it.

Written from the definitions in docs/result-json.md ("reference"), independently of the C++ agent: both
models (hf_reference.py, float32) run on the windows of reference_ppl.py's protocol, one window at a time;
each scored row's logits go to float64 and through log_softmax, then per token
  kld  = sum_v p_ref(v) (ln p_ref(v) - ln p_model(v))      (the whole vocabulary)
  same = argmax p_ref == argmax p_model
  d    = nll_model - nll_ref                                 (the token's ln PPL ratio)
  dp   = p_model(target) - p_ref(target)
Writes --json {"tokens", "kld_sum", "kld_sq_sum", "kld_max", "same_top", "diff_sum", "diff_sq_sum",
"dp_sum", "dp_sq_sum", "nll_sum", "reference_nll_sum"} (sums by math.fsum: correctly rounded) and the
figures the agent derives from them (kld_mean, ppl_ratio, same_top fraction, dp_rms). Run with /usr/bin/python3.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import UsageError, load_model_dir, read_tokens, run_main  # noqa: E402
from reference_ppl import PROTOCOLS, plan, window_input  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="the model evaluated (HF directory)")
    p.add_argument("--reference", required=True, help="the reference model (HF directory, same vocabulary)")
    p.add_argument("--text", required=True, help="text file; its UTF-8 bytes are the token ids")
    p.add_argument("--protocol", required=True, choices=PROTOCOLS)
    p.add_argument("--context", type=int, required=True)
    p.add_argument("--max-windows", type=int)
    p.add_argument("--json", required=True)
    return p.parse_args(argv)


def compare_rows(lm, lr, tgt, acc):
    """Adds one window's scored rows (float64 log-probabilities [n, V] of model and reference)."""
    pr = lr.exp()
    kld = (pr * (lr - lm)).sum(dim=-1)
    rows = torch.arange(lm.shape[0])
    nll_m, nll_r = -lm[rows, tgt], -lr[rows, tgt]
    same = lm.argmax(dim=-1) == lr.argmax(dim=-1)
    dp = lm[rows, tgt].exp() - lr[rows, tgt].exp()
    acc["kld"].extend(kld.tolist())
    acc["same"] += int(same.sum())
    acc["diff"].extend((nll_m - nll_r).tolist())
    acc["dp"].extend(dp.tolist())
    acc["nll"].extend(nll_m.tolist())
    acc["ref_nll"].extend(nll_r.tolist())


def summary(acc):
    n = len(acc["kld"])
    s = {"tokens": n, "same_top": acc["same"], "kld_max": max(acc["kld"])}
    for key, values in (("kld", acc["kld"]), ("diff", acc["diff"]), ("dp", acc["dp"])):
        s[key + "_sum"] = math.fsum(values)
        s[key + "_sq_sum"] = math.fsum(v * v for v in values)
    s["nll_sum"] = math.fsum(acc["nll"])
    s["reference_nll_sum"] = math.fsum(acc["ref_nll"])
    s["kld_mean"] = s["kld_sum"] / n
    s["ppl_ratio"] = math.exp(s["diff_sum"] / n)
    s["same_top_fraction"] = acc["same"] / n
    s["dp_rms"] = math.sqrt(s["dp_sq_sum"] / n)
    return s


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(1)
    tokens = read_tokens(None, a.text)
    bos = 0 if a.protocol == "lm-eval-rolling" else None
    windows = plan(a.protocol, len(tokens), a.context, a.context, bos, a.max_windows)
    if not windows:
        raise UsageError("nothing to score")
    model, _ = load_model_dir(a.model)
    reference, _ = load_model_dir(a.reference)
    acc = {"kld": [], "same": 0, "diff": [], "dp": [], "nll": [], "ref_nll": []}
    with torch.inference_mode():
        for w in windows:
            ids = torch.from_numpy(window_input(tokens, w, a.protocol, bos)).view(1, -1)
            pos = torch.tensor(w.pos, dtype=torch.int64)
            tgt = torch.from_numpy(tokens[w.tgt_idx])
            lm = torch.log_softmax(model(ids)[0, pos].to(torch.float64), dim=-1)
            lr = torch.log_softmax(reference(ids)[0, pos].to(torch.float64), dim=-1)
            compare_rows(lm, lr, tgt, acc)
    s = summary(acc)
    with open(a.json, "w") as f:
        json.dump(s, f)
    print(json.dumps(s))
    return 0


if __name__ == "__main__":
    run_main(main)
