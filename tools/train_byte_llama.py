#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Trains ClusterPPL's embedded demo model: a small byte-level Llama on Tiny Shakespeare.

Token ids are the raw bytes of the text (vocabulary 256, no BOS/EOS). The model is transformers'
LlamaForCausalLM architecture as re-implemented in tests/agent/reference/hf_reference.py (LlamaRef),
trained in float32 on the CPU with Debian's PyTorch, and written as a Hugging Face directory
(config.json + model.safetensors, F32) that both transformers and the C++ agent can load.

Reproducible: fixed seeds, a seeded generator for the window offsets, a fixed thread count. Run with
/usr/bin/python3 (python3-torch), e.g.

    /usr/bin/python3 tools/train_byte_llama.py --out resources/models/shakespeare-byte-llama

Held-out perplexity (printed at the end, and by --eval-only DIR for any saved directory) is
byte-level, the hf-sliding protocol with stride = context (docs/protocols.md): the held-out bytes
are cut into non-overlapping windows [0, C), [C, 2C), ... (the last one may be shorter); within
each window every byte after the first is scored from the window's preceding bytes; a window's first
byte is never a target (a one-byte tail window is skipped). PPL = exp(sum NLL / number of scored
bytes), the NLL summed in float64 over all scored bytes (not an average of per-window means).
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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "agent", "reference"))
import hf_reference  # noqa: E402

DEFAULT_DATA = "/work/shared/data/tinyshakespeare/input.txt"
DEFAULT_SPLIT = 1003854  # first 90% of the 1,115,394-byte input.txt


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=DEFAULT_DATA, help="Tiny Shakespeare input.txt")
    p.add_argument("--split", type=int, default=DEFAULT_SPLIT,
                   help="train = bytes [0, split), held-out = bytes [split, end)")
    p.add_argument("--out", default=os.path.join(ROOT, "resources", "models", "shakespeare-byte-llama"),
                   help="output directory (config.json, model.safetensors)")
    p.add_argument("--steps", type=int, default=650, help="optimizer steps")
    p.add_argument("--batch", type=int, default=16, help="windows per step")
    p.add_argument("--context", type=int, default=256, help="training window length (tokens)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--min-lr-ratio", type=float, default=0.1, help="final lr = lr * ratio (cosine floor)")
    p.add_argument("--warmup", type=int, default=50, help="linear warmup steps")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW decay on matrices (not norms/embeddings)")
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clip")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--hidden", type=int, default=192, help="hidden_size")
    p.add_argument("--layers", type=int, default=4, help="num_hidden_layers")
    p.add_argument("--heads", type=int, default=6, help="num_attention_heads")
    p.add_argument("--kv-heads", type=int, default=2, help="num_key_value_heads (grouped-query attention)")
    p.add_argument("--intermediate", type=int, default=512, help="intermediate_size")
    p.add_argument("--max-positions", type=int, default=512, help="max_position_embeddings")
    p.add_argument("--rms-eps", type=float, default=1e-5, help="rms_norm_eps")
    p.add_argument("--init-std", type=float, default=0.02, help="initializer_range")
    p.add_argument("--eval-context", type=int, default=0, help="held-out window length (0 = --context)")
    p.add_argument("--eval-batch", type=int, default=16, help="windows per held-out forward")
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--eval-only", metavar="DIR", default=None,
                   help="load DIR with hf_reference.load_model and only print its held-out perplexity")
    return p.parse_args(argv)


def make_config(a):
    assert a.hidden % a.heads == 0 and a.heads % a.kv_heads == 0
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 256,
        "hidden_size": a.hidden,
        "intermediate_size": a.intermediate,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": a.hidden // a.heads,
        "max_position_embeddings": a.max_positions,
        "rms_norm_eps": a.rms_eps,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "hidden_act": "silu",
        "initializer_range": a.init_std,
        "tie_word_embeddings": False,
        "use_cache": True,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "torch_dtype": "float32",
    }


def init_weights(model, std, layers):
    """transformers' LlamaPreTrainedModel init (N(0, std), ones for norms), with the residual output
    projections (o_proj, down_proj) scaled by 1/sqrt(2 * layers) as in GPT-2."""
    g = torch.Generator().manual_seed(0)  # independent of the data order
    for name, p in model.named_parameters():
        if name.endswith("layernorm.weight") or name == "norm.weight":
            torch.nn.init.ones_(p)
            continue
        s = std / math.sqrt(2 * layers) if name.endswith(("o_proj.weight", "down_proj.weight")) else std
        with torch.no_grad():
            p.copy_(torch.randn(p.shape, generator=g) * s)


def read_bytes(path):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()


@torch.no_grad()
def heldout_nll(model, tokens, context, batch):
    """hf-sliding with stride = context: windows [b, min(b + C, n)) for b = 0, C, 2C, ...; targets
    b+1 .. end-1 of each window, scored from the logits one position earlier. Returns (sum NLL in
    float64, scored targets, windows)."""
    model.eval()
    n = tokens.numel()
    starts = [b for b in range(0, n, context) if min(b + context, n) - b >= 2]
    full = [b for b in starts if b + context <= n]
    tail = [b for b in starts if b + context > n]
    total = torch.zeros((), dtype=torch.float64)
    count = 0
    groups = [full[i:i + batch] for i in range(0, len(full), batch)] + [[b] for b in tail]
    for group in groups:
        length = min(group[0] + context, n) - group[0]
        ids = torch.stack([tokens[b:b + length] for b in group])
        logits = model(ids)[:, :-1]
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none")
        total += nll.double().sum()
        count += nll.numel()
    return total.item(), count, len(starts)


def report_heldout(model, heldout, context, batch):
    t0 = time.time()
    total, count, windows = heldout_nll(model, heldout, context, batch)
    mean = total / count
    print("held-out: %d bytes, context %d, %d windows (stride %d), %d scored bytes (each window's "
          "first byte unscored)" % (heldout.numel(), context, windows, context, count))
    print("held-out: sum NLL %.6f nats, mean %.6f nats/byte = %.6f bits/byte, perplexity %.6f  (%.1f s)"
          % (total, mean, mean / math.log(2), math.exp(mean), time.time() - t0))
    return mean


def lr_at(step, a):
    """Linear warmup over `warmup` steps, then cosine from lr to lr * min_lr_ratio at the last step."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = (step - a.warmup) / max(1, a.steps - 1 - a.warmup)
    floor = a.lr * a.min_lr_ratio
    return floor + 0.5 * (a.lr - floor) * (1.0 + math.cos(math.pi * min(1.0, progress)))


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)

    data = read_bytes(a.data)
    train, heldout = data[:a.split], data[a.split:]
    eval_context = a.eval_context or a.context

    if a.eval_only:
        model = hf_reference.load_model(a.eval_only)
        print("loaded %s (%d parameters)" % (a.eval_only, sum(p.numel() for p in model.parameters())))
        report_heldout(model, heldout, eval_context, a.eval_batch)
        return

    config = make_config(a)
    model = hf_reference.LlamaRef(config)
    init_weights(model, a.init_std, a.layers)
    n_params = sum(p.numel() for p in model.parameters())
    print("config: " + json.dumps(config, sort_keys=True))
    print("parameters: %d; train %d bytes, held-out %d bytes; %d steps x %d windows x %d tokens = %d tokens "
          "(%.2f epochs)" % (n_params, train.numel(), heldout.numel(), a.steps, a.batch, a.context,
                              a.steps * a.batch * a.context, a.steps * a.batch * a.context / train.numel()))
    print("args: " + " ".join("--%s %s" % (k.replace("_", "-"), v) for k, v in sorted(vars(a).items())))

    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed_tokens" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed_tokens" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=1e-8)

    gen = torch.Generator().manual_seed(a.seed)  # window offsets: the only source of data order
    offsets_max = train.numel() - a.context - 1
    arange = torch.arange(a.context + 1)
    losses = []
    t_start = time.time()
    model.train()
    for step in range(a.steps):
        lr = lr_at(step, a)
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, offsets_max + 1, (a.batch,), generator=gen)
        chunk = train[starts[:, None] + arange]
        x, y = chunk[:, :-1], chunk[:, 1:]
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        losses.append(loss.item())
        if (step + 1) % a.log_every == 0 or step == 0 or step + 1 == a.steps:
            elapsed = time.time() - t_start
            tok_s = (step + 1) * a.batch * a.context / elapsed
            eta = elapsed / (step + 1) * (a.steps - step - 1)
            recent = losses[-a.log_every:]
            print("step %5d/%d  loss %.4f  (mean of last %d: %.4f)  lr %.2e  gnorm %.3f  %.0f tok/s  "
                  "elapsed %.0fs  ETA %.0fs" % (step + 1, a.steps, loss.item(), len(recent),
                                               sum(recent) / len(recent), lr, gnorm.item(), tok_s, elapsed, eta),
                  flush=True)
    train_time = time.time() - t_start
    last = losses[-100:]
    print("training done: %.1f s (%.1f min), final loss %.4f, mean loss over the last %d steps %.4f "
          "(%.4f bits/byte)" % (train_time, train_time / 60, losses[-1], len(last), sum(last) / len(last),
                                sum(last) / len(last) / math.log(2)))

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    tensors = {k: v.detach().float().contiguous() for k, v in model.hf_state_dict().items()}
    hf_reference.save_safetensors(os.path.join(a.out, "model.safetensors"), tensors, {"format": "pt"})
    print("wrote %s (config.json, model.safetensors: %d tensors, %d bytes)"
          % (a.out, len(tensors), os.path.getsize(os.path.join(a.out, "model.safetensors"))))

    report_heldout(model, heldout, eval_context, a.eval_batch)


if __name__ == "__main__":
    main()
