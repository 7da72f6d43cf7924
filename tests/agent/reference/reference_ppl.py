#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reference perplexity of a token file under one of three evaluation protocols.

Each protocol is transcribed from the tool it names, independently of the C++ agent:
  hf-sliding      Hugging Face "Perplexity of fixed-length models" (stride loop, labels -100, shift by one)
  llama.cpp       llama.cpp `perplexity` (n_tokens // n_ctx chunks, second half of each chunk scored)
  lm-eval-rolling lm-evaluation-harness loglikelihood_rolling (get_rolling_token_windows with
                  context_len=1 + make_disjoint_window, scored as HFLM does); the whole file is ONE document
Windows are evaluated one at a time (batch 1). Per-token NLL = -log_softmax(float64(logits))[target];
nll_sum is math.fsum of those float64 values (correctly rounded). Writes --json
{"tokens_scored", "nll_sum", "ppl" = exp(nll_sum / tokens_scored), "windows", ...}.

--plan-out FILE writes the window plan in flat token coordinates (no model needed with --plan-only):
[{"input": [begin, end], "scored": [begin, end], "bos": bool}, ...]; target t is scored from the
logits at input position t - 1 - input_begin. For lm-eval-rolling the first window's input begins
at -1: position -1 is the prefix token (--bos-id), which is not part of the token file.
--self-test checks the window generators on hand-worked cases and exits. Run with /usr/bin/python3.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import UsageError, load_model_dir, max_positions, read_tokens, run_main  # noqa: E402

PROTOCOLS = ("hf-sliding", "llama.cpp", "lm-eval-rolling")


# ----------------------------------------------------------------------------------------------
# A window: input = flat token positions [in_b, in_e) (lm-eval: -1 = prefix token), the logits at
# input positions `pos` score the flat targets `tgt_idx`; `bos` = first input token replaced by BOS.
# ----------------------------------------------------------------------------------------------
class Window:
    __slots__ = ("in_b", "in_e", "pos", "tgt_idx", "bos")

    def __init__(self, in_b, in_e, pos, tgt_idx, bos=False):
        self.in_b, self.in_e = int(in_b), int(in_e)
        self.pos = [int(p) for p in pos]
        self.tgt_idx = [int(t) for t in tgt_idx]
        self.bos = bos

    def plan(self):
        s = self.tgt_idx
        assert s == list(range(s[0], s[-1] + 1)) if s else True  # scored targets are contiguous
        return {"input": [self.in_b, self.in_e], "scored": [s[0], s[-1] + 1] if s else [self.in_e, self.in_e],
                "bos": self.bos}


def hf_sliding_windows(n, max_length, stride):
    """Hugging Face's loop, run on the flat positions 0..n-1 instead of token ids."""
    seq = np.arange(n, dtype=np.int64)
    prev_end_loc = 0
    for begin_loc in range(0, n, stride):
        end_loc = min(begin_loc + max_length, n)
        trg_len = end_loc - prev_end_loc  # may be different from stride on last loop
        input_ids = seq[begin_loc:end_loc]
        target_ids = input_ids.copy()
        target_ids[:-trg_len] = -100
        # The model's loss: logits[..., :-1, :] against labels[..., 1:], ignoring -100.
        shift_labels = target_ids[1:]
        keep = np.nonzero(shift_labels != -100)[0]
        yield Window(begin_loc, end_loc, keep, shift_labels[keep])
        prev_end_loc = end_loc
        if end_loc == n:
            break


def llama_cpp_windows(n, n_ctx, bos):
    """llama.cpp perplexity(): n_chunk = n / n_ctx; first = n_ctx / 2; score tokens first+1 .. n_ctx-1."""
    n_chunk = n // n_ctx
    first = n_ctx // 2
    for i in range(n_chunk):
        start = i * n_ctx
        # logits at batch positions first .. n_ctx-2 predict tokens[start+first+1 .. start+n_ctx-1]
        pos = range(first, n_ctx - 1)
        yield Window(start, start + n_ctx, pos, [start + p + 1 for p in pos], bos=bos is not None)


def get_rolling_token_windows(token_list, prefix_token, max_seq_len, context_len):
    """lm-evaluation-harness lm_eval/utils.py (transcribed)."""
    assert 1 <= context_len <= max_seq_len
    if not token_list:
        return
    # +1 offset, going from input->preds
    pred_len = max_seq_len - context_len + 1
    predicted = 0

    # Special handling for first window: predict all tokens
    first_seq_len = min(max_seq_len, len(token_list))
    yield [prefix_token] + token_list[:first_seq_len - 1], token_list[:first_seq_len]
    predicted += first_seq_len

    while predicted < len(token_list):
        window_pred_len = min(len(token_list) - predicted, pred_len)
        window_end = predicted + window_pred_len

        yield (
            token_list[window_end - max_seq_len - 1:window_end - 1],
            token_list[window_end - window_pred_len:window_end],
        )
        predicted += window_pred_len


def make_disjoint_window(pair):
    """Takes output from get_rolling_token_windows and makes the context not overlap with the continuation."""
    a, b = pair
    return a[:len(a) - (len(b) - 1)], b


def lm_eval_rolling_windows(n, max_length):
    """HFLM.loglikelihood_rolling + _loglikelihood_tokens on flat positions (-1 = the prefix token)."""
    PREFIX = -1
    for context_enc, continuation_enc in map(make_disjoint_window, get_rolling_token_windows(
            token_list=list(range(n)), prefix_token=PREFIX, max_seq_len=max_length, context_len=1)):
        inp = (context_enc + continuation_enc)[-(max_length + 1):][:-1]
        inplen = len(inp)
        contlen = len(continuation_enc)
        # _select_cont_toks: logits[inplen - contlen : inplen] score continuation_enc
        pos = list(range(inplen - contlen, inplen))
        assert inp == list(range(inp[0], inp[0] + inplen)), "rolling window input is not contiguous"
        yield Window(inp[0], inp[0] + inplen, pos, continuation_enc)


def plan(protocol, n, context, stride, bos, max_windows):
    if protocol == "hf-sliding":
        gen = hf_sliding_windows(n, context, stride)
    elif protocol == "llama.cpp":
        gen = llama_cpp_windows(n, context, bos)
    else:
        gen = lm_eval_rolling_windows(n, context)
    out = []
    for w in gen:
        if not w.tgt_idx:
            continue  # nothing scored: contributes nothing, not counted
        out.append(w)
        if max_windows is not None and len(out) == max_windows:
            break
    return out


def window_input(tokens, w, protocol, bos):
    if w.in_b < 0:  # lm-eval prefix token
        assert protocol == "lm-eval-rolling" and w.in_b == -1
        ids = np.concatenate([np.array([bos], dtype=np.int64), tokens[0:w.in_e]])
    else:
        ids = tokens[w.in_b:w.in_e].copy()
    if w.bos:
        ids[0] = bos
    return ids


# ----------------------------------------------------------------------------------------------
def self_test():
    def scored(ws):
        return sum(len(w.tgt_idx) for w in ws)

    # Hand-worked counts from the brief.
    w = plan("hf-sliding", 10, 4, 4, None, None)
    assert scored(w) == 7 and [x.plan()["scored"] for x in w] == [[1, 4], [5, 8], [9, 10]], [x.plan() for x in w]
    w = plan("llama.cpp", 20, 8, None, 1, None)
    assert scored(w) == 6 and [x.plan()["scored"] for x in w] == [[5, 8], [13, 16]], [x.plan() for x in w]
    for n in (1, 5, 10, 11, 34, 300):
        for c in (1, 2, 4, 10):
            w = plan("lm-eval-rolling", n, c, None, 0, None)
            flat = [t for x in w for t in x.tgt_idx]
            assert flat == list(range(n)), (n, c)
            for x in w:  # target t is scored from the logit right before it
                assert all(t - 1 - x.in_b == p for p, t in zip(x.pos, x.tgt_idx)), (n, c)
                assert x.in_e - x.in_b <= c
    # lm-eval with N=34, C=10 (positions): four windows; the last one re-reads context to fill C.
    w = plan("lm-eval-rolling", 34, 10, None, 0, None)
    assert [(x.plan()["input"], x.plan()["scored"]) for x in w] == [
        ([-1, 9], [0, 10]), ([9, 19], [10, 20]), ([19, 29], [20, 30]), ([23, 33], [30, 34])], [x.plan() for x in w]
    # hf-sliding with overlap: N=10, C=4, S=2 -> windows [0,4) [2,6) [4,8) [6,10); 3 + 2 + 2 + 2 scored.
    w = plan("hf-sliding", 10, 4, 2, None, None)
    assert [x.plan()["scored"] for x in w] == [[1, 4], [4, 6], [6, 8], [8, 10]], [x.plan() for x in w]
    # one-token tail window scores nothing and is not counted: N=9, C=4, S=4 -> 3 + 3 scored, 2 windows.
    w = plan("hf-sliding", 9, 4, 4, None, None)
    assert len(w) == 2 and scored(w) == 6
    # general invariants: every target scored at most once, from the preceding position.
    for proto in PROTOCOLS:
        for n in range(1, 40):
            for c in range(1, 9):
                for s in ((1, 2, 3, c) if proto == "hf-sliding" else (None,)):
                    if s is not None and s > c:
                        continue
                    ws = plan(proto, n, c, s, 0, None)
                    flat = [t for x in ws for t in x.tgt_idx]
                    assert len(flat) == len(set(flat))
                    for x in ws:
                        assert all(t - 1 - x.in_b == p for p, t in zip(x.pos, x.tgt_idx))
                        assert all(0 <= p < x.in_e - x.in_b for p in x.pos)
                    if proto == "hf-sliding":  # S < C: all but token 0; S == C: all but 0, C, 2C, ...
                        assert flat == [t for t in range(1, n) if s < c or t % c], (n, c, s)
                    if proto == "llama.cpp":
                        assert len(flat) == (n // c) * (c - 1 - c // 2)
    w = plan("llama.cpp", 20, 8, None, None, 1)
    assert len(w) == 1 and scored(w) == 3
    print(json.dumps({"self_test": "ok"}))


# ----------------------------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", help="HF checkpoint directory (hf_reference: float32; issue-42 families float64)")
    src.add_argument("--torchscript", help="TorchScript file: int64 ids [B,T] -> logits [B,T,V]")
    p.add_argument("--tokens", help="token file: .u32 / .u16 (raw little-endian) or .npy (1-D integer)")
    p.add_argument("--text", help="text file; its UTF-8 bytes are the token ids")
    p.add_argument("--protocol", choices=PROTOCOLS)
    p.add_argument("--context", type=int, help="C: max_length (hf-sliding), n_ctx (llama.cpp), max_seq_len (lm-eval)")
    p.add_argument("--stride", type=int, help="hf-sliding stride (default: --context)")
    p.add_argument("--bos-id", type=int,
                   help="llama.cpp: overwrite each chunk's first input token with this id (default: no BOS); "
                        "lm-eval-rolling: the prefix token (default 0)")
    p.add_argument("--max-windows", type=int, help="only the first K (scoring) windows")
    p.add_argument("--json", help="output JSON file")
    p.add_argument("--nll-out", help="optional: per-token NLL as raw little-endian float64, in scoring order")
    p.add_argument("--plan-out", help="optional: window plan JSON (see below)")
    p.add_argument("--plan-only", action="store_true", help="write --plan-out / --json counts without a model")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--self-test", action="store_true", help="check the window generators and exit")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    if a.self_test:
        self_test()
        return 0
    torch.set_num_threads(a.threads)
    if a.protocol is None or a.context is None:
        raise UsageError("--protocol and --context are required")
    if not a.plan_only and not (a.model or a.torchscript):
        raise UsageError("give --model DIR or --torchscript FILE (or --plan-only)")
    if not a.plan_only and not a.json:
        raise UsageError("--json OUT is required")
    if a.plan_only and not (a.plan_out or a.json):
        raise UsageError("--plan-only needs --plan-out and/or --json")
    if a.context < 1:
        raise UsageError("--context must be >= 1")
    if a.stride is not None and a.protocol != "hf-sliding":
        raise UsageError("--stride applies to hf-sliding only")
    if a.bos_id is not None and a.protocol == "hf-sliding":
        raise UsageError("--bos-id does not apply to hf-sliding")
    if a.bos_id is not None and a.bos_id < 0:
        raise UsageError("--bos-id must be >= 0")
    stride = a.stride if a.stride is not None else a.context
    if stride < 1:
        raise UsageError("--stride must be >= 1")
    if a.max_windows is not None and a.max_windows < 1:
        raise UsageError("--max-windows must be >= 1")
    bos = a.bos_id
    if a.protocol == "lm-eval-rolling" and bos is None:
        bos = 0

    tokens = read_tokens(a.tokens, a.text)
    n = len(tokens)
    if n == 0:
        raise UsageError("the token file is empty")
    if a.protocol == "llama.cpp" and n < a.context:
        raise UsageError("llama.cpp needs at least --context %d tokens, the file has %d" % (a.context, n))
    windows = plan(a.protocol, n, a.context, stride, bos, a.max_windows)
    scored_total = sum(len(w.tgt_idx) for w in windows)
    if scored_total == 0:
        raise UsageError("nothing to score: %s with context %d on %d tokens scores no token"
                         % (a.protocol, a.context, n))
    if a.plan_out:
        with open(a.plan_out, "w") as f:
            json.dump([w.plan() for w in windows], f)
    summary = {"protocol": a.protocol, "context": a.context, "n_tokens": n, "windows": len(windows),
               "tokens_scored": scored_total}
    if a.protocol == "hf-sliding":
        summary["stride"] = stride
    if bos is not None:
        summary["bos_id"] = bos
    if a.plan_only:
        if a.json:
            with open(a.json, "w") as f:
                json.dump(summary, f)
        print(json.dumps(summary))
        return 0

    if a.model:
        model, config = load_model_dir(a.model)
        V = int(config["vocab_size"])
        P = max_positions(config)
        widest = max(w.in_e - w.in_b for w in windows)
        if P is not None and widest > P:
            raise UsageError("windows of %d tokens exceed the model's %d positions" % (widest, P))
    else:
        model = torch.jit.load(a.torchscript, map_location="cpu").eval()
        V = None
    hi = int(tokens.max())
    if bos is not None:
        hi = max(hi, bos)
    if V is not None and hi >= V:
        raise UsageError("token id %d out of range for vocab_size %d" % (hi, V))

    nll = []
    with torch.inference_mode():
        for w in windows:
            ids = torch.from_numpy(window_input(tokens, w, a.protocol, bos)).view(1, -1)
            logits = model(ids)
            if logits.dim() != 3 or tuple(logits.shape[:2]) != (1, ids.shape[1]):
                raise UsageError("model returned shape %s for input %s" % (tuple(logits.shape), tuple(ids.shape)))
            if V is None:
                V = logits.shape[-1]
                if hi >= V:
                    raise UsageError("token id %d out of range for the model's %d logits" % (hi, V))
            pos = torch.tensor(w.pos, dtype=torch.int64)
            tgt = torch.from_numpy(tokens[w.tgt_idx])
            rows = logits[0, pos]
            # 32 rows at a time: log_softmax is per row, so the values are the same, and the float64
            # copies stay small enough to be reused instead of newly mapped and page-faulted for every
            # window (with a 50257-word vocabulary that was most of the reference's time).
            for r0 in range(0, rows.shape[0], 32):
                lp = torch.log_softmax(rows[r0:r0 + 32].to(torch.float64), dim=-1)
                nll.extend((-lp[torch.arange(lp.shape[0]), tgt[r0:r0 + 32]]).tolist())
    nll_sum = math.fsum(nll)
    if not math.isfinite(nll_sum):
        raise UsageError("non-finite NLL sum")
    summary.update({"nll_sum": nll_sum, "ppl": math.exp(nll_sum / len(nll))})
    assert len(nll) == scored_total
    with open(a.json, "w") as f:
        json.dump(summary, f)
    if a.nll_out:
        np.asarray(nll, dtype="<f8").tofile(a.nll_out)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    run_main(main)
