# SPDX-License-Identifier: MIT
"""The issue-42 families' part of check_reference_tools.py: checkpoints of every family and
variant through make_checkpoint.py and reference_logits.py against np_families.py (a second,
independent NumPy float64 transcription), that the checkpoints really exercise each feature (the
window's exact reach, soft-caps reached, router ties broken by index, Gemma's rounded embedding
scale, Phi-3's long factors past original_max_position_embeddings), protocol NLLs against the
transcription, and the refusals. Run through check_reference_tools.py (it owns the tools and the
report); /usr/bin/python3.
"""
import json
import os

import numpy as np
import torch

import families_reference
import hf_reference
from np_families import np_family

# label, make_checkpoint flags. Every default checkpoint exercises its family's features.
VARIANTS = [
    ("qwen3", ["--arch", "qwen3"]),
    ("qwen3-bf16-sharded-tied", ["--arch", "qwen3", "--dtype", "BF16", "--sharded", "--tied"]),
    ("qwen3-bias-mha", ["--arch", "qwen3", "--attention-bias", "--kv-heads", "4", "--head-dim", "8"]),
    ("gemma2", ["--arch", "gemma2"]),
    ("gemma2-bf16", ["--arch", "gemma2", "--dtype", "BF16"]),
    ("gemma2-f16-sharded-nocap", ["--arch", "gemma2", "--dtype", "F16", "--sharded", "--attn-softcap", "none",
                                  "--final-softcap", "none", "--sliding-window", "7"]),
    ("gemma3", ["--arch", "gemma3"]),
    ("gemma3-bf16-plain-rope", ["--arch", "gemma3", "--dtype", "BF16", "--rope-scaling", "none", "--layers", "6",
                                "--sliding-window-pattern", "6"]),
    ("gemma3-softcap-bias", ["--arch", "gemma3", "--attn-softcap", "2.0", "--final-softcap", "4.0", "--attention-bias"]),
    ("phi3", ["--arch", "phi3"]),
    ("phi3-window", ["--arch", "phi3", "--sliding-window", "5", "--kv-heads", "2"]),
    ("phi3-longrope", ["--arch", "phi3", "--rope-scaling", "longrope"]),
    ("phi3-su-partial-tied", ["--arch", "phi3", "--rope-scaling", "su", "--partial-rotary", "0.5", "--tied", "--sharded"]),
    ("mistral", ["--arch", "mistral"]),
    ("mistral-bf16-sharded", ["--arch", "mistral", "--dtype", "BF16", "--sharded", "--sliding-window", "3"]),
    ("mistral-headdim", ["--arch", "mistral", "--head-dim", "16", "--kv-heads", "1"]),
    ("mixtral", ["--arch", "mixtral"]),
    ("mixtral-window-bf16", ["--arch", "mixtral", "--sliding-window", "5", "--dtype", "BF16", "--sharded"]),
    ("mixtral-top1", ["--arch", "mixtral", "--experts", "3", "--top-k", "1"]),
    ("qwen2_moe", ["--arch", "qwen2_moe"]),
    ("qwen2_moe-norm-topk", ["--arch", "qwen2_moe", "--norm-topk-prob", "--kv-heads", "2", "--tied"]),
    ("qwen2_moe-sparse-step", ["--arch", "qwen2_moe", "--layers", "4", "--decoder-sparse-step", "2",
                               "--mlp-only-layers", "3", "--experts", "6", "--top-k", "3"]),
]
T_CHECK = 20  # longer than every default window and than phi3's original_max_position_embeddings 16


def reference(d):
    """The float64 family module, also for configs hf_reference would give to LlamaRef (Mistral without a window)."""
    config, tensors = hf_reference.load_hf_dir(d)
    return families_reference.FamilyRef(config, tensors).eval()


def ref_logits(model, ids):
    with torch.inference_mode():
        return model(torch.as_tensor(np.asarray(ids), dtype=torch.int64)).numpy()


def variant_config(tmp, label, edit):
    """A copy of checkpoint `label` with config.json edited (same tensor files, by symlink)."""
    src, dst = os.path.join(tmp, label), os.path.join(tmp, label + "-edited")
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f != "config.json" and not os.path.exists(os.path.join(dst, f)):
            os.symlink(os.path.join(src, f), os.path.join(dst, f))
    cfg = json.load(open(os.path.join(src, "config.json")))
    edit(cfg)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)
    return dst


def check_logits(tmp, tool, read_dir, check):
    rng = np.random.default_rng(42)
    for label, args in VARIANTS:
        d = os.path.join(tmp, label)
        info = json.loads(tool("make_checkpoint.py", "--out", d, "--seed", "5", *args).stdout)
        cfg, W, dtypes = read_dir(d)
        dt = args[args.index("--dtype") + 1] if "--dtype" in args else "F32"
        sharded = os.path.exists(os.path.join(d, "model.safetensors.index.json"))
        files_ok = set(dtypes.values()) == {dt} and sharded == ("--sharded" in args)
        ids = rng.integers(0, cfg["vocab_size"], (2, T_CHECK))
        want = np_family(cfg, W, dtypes, ids)
        out = os.path.join(tmp, label + ".f32")
        r = tool("reference_logits.py", "--model", d, "--ids", ";".join(",".join(map(str, row)) for row in ids),
                 "--out", out)
        got = np.fromfile(out, "<f4").reshape(json.loads(r.stdout)["shape"])
        err32 = np.abs(got - want).max() / np.abs(want).max()
        err64 = np.abs(ref_logits(reference(d), ids) - want).max() / np.abs(want).max()
        check("family %s (%d tensors): reference_logits = numpy float64 (float32 out), in-process float64 = numpy"
              % (label, info["tensors"]), files_ok and got.shape == want.shape and err32 < 1e-6 and err64 < 1e-11,
              "(rel. max |diff| %.1e / %.1e, logit std %.2f)" % (err32, err64, want.std()))
        if label == "phi3-longrope":  # 11 positions: the short factors, so the first 11 logits change
            short = np_family(cfg, W, dtypes, ids[:, :11])
            same = np.abs(ref_logits(reference(d), ids[:, :11]) - short).max() / np.abs(short).max()
            check("phi3 longrope: T=11 <= 16 short factors, T=20 long ones; both = numpy",
                  same < 1e-11 and np.abs(short - want[:, :11]).max() > 1e-3, "(%.1e)" % same)


def check_window(tmp, check):
    """The window's reach, pinned: mistral W=6 against the same weights without a window."""
    d = os.path.join(tmp, "mistral")
    W = json.load(open(os.path.join(d, "config.json")))["sliding_window"]
    ids = np.arange(1, T_CHECK + 1)[None] % 97
    windowed = ref_logits(reference(d), ids)[0]
    full = ref_logits(reference(variant_config(tmp, "mistral", lambda c: c.update(sliding_window=None))), ids)[0]
    diff = np.abs(windowed - full).max(-1)
    first = int(np.nonzero(diff > 0)[0][0])
    check("mistral sliding_window %d: a query at t sees keys t-%d..t (positions < %d identical to no window, %d differs)"
          % (W, W - 1, W, W), first == W and np.all(diff[:W] == 0) and np.all(diff[W:] > 1e-6),
          "(first differing position %d)" % first)
    g = os.path.join(tmp, "gemma2")  # layer 0 slides, layer 1 is global, layer 2 slides
    cfg = json.load(open(os.path.join(g, "config.json")))
    plain = variant_config(tmp, "gemma2", lambda c: c.update(sliding_window=1000))
    diff = np.abs(ref_logits(reference(g), ids) - ref_logits(reference(plain), ids))[0].max(-1)
    check("gemma2 sliding layers: window %d acts from position %d on" % (cfg["sliding_window"], cfg["sliding_window"]),
          np.all(diff[:cfg["sliding_window"]] == 0) and diff[cfg["sliding_window"]] > 1e-6)


def check_features(tmp, check):
    g = reference(os.path.join(tmp, "gemma2"))
    raw = reference(variant_config(tmp, "gemma2",
                                   lambda c: c.update(final_logit_softcapping=None, attn_logit_softcapping=None)))
    ids = np.arange(3, 3 + T_CHECK)[None]
    capped, uncapped = ref_logits(g, ids), ref_logits(raw, ids)
    cap = g.config["final_logit_softcapping"]
    check("gemma2 soft-caps reached: raw logits beyond the final cap %.1f, capped within it" % cap,
          np.abs(uncapped).max() > cap and np.abs(capped).max() < cap, "(raw max %.2f, capped %.2f)"
          % (np.abs(uncapped).max(), np.abs(capped).max()))
    attn_only = reference(variant_config(tmp, "gemma2", lambda c: c.update(attn_logit_softcapping=None)))
    check("gemma2 attention soft-cap changes the logits", np.abs(ref_logits(attn_only, ids) - capped).max() > 1e-2)
    b16, f32 = reference(os.path.join(tmp, "gemma2-bf16")), reference(os.path.join(tmp, "gemma2"))
    check("gemma embedding scale in the stored dtype: sqrt(32) = 5.65625 in bfloat16, float32 sqrt in float32",
          b16.embed_scale == 5.65625 and f32.embed_scale == float(np.float32(32 ** 0.5)))
    norms = [t for n, t in hf_reference.load_hf_dir(os.path.join(tmp, "qwen3"))[1].items() if "norm" in n]
    spread = torch.cat([t.flatten() for t in norms])
    check("norm weights far from 1 (qwen3: q/k and layer norms)", spread.min() < 0.7 and spread.max() > 2.0,
          "(%.2f .. %.2f)" % (spread.min(), spread.max()))
    for label in ("mixtral", "qwen2_moe"):
        m = reference(os.path.join(tmp, label))
        probs, chosen = m.routing(torch.as_tensor(np.arange(0, 97)[None] % 97, dtype=torch.int64))[0]
        tied = probs[:, 1] == probs[:, 2]
        straddle = [(1 in row) != (2 in row) for row in chosen.tolist()]
        by_index = all((1 in row) for row, s in zip(chosen.tolist(), straddle) if s)
        check("%s layer 0: experts 1 and 2 tie exactly on every token; where the tie straddles the top-%d the lower index wins"
              % (label, m.spec.top_k), bool(tied.all()) and sum(straddle) > 0 and by_index,
              "(%d of %d tokens straddle)" % (sum(straddle), len(straddle)))


def direct_nll(cfg, W, dtypes, inp, pos, tgt):
    z = np_family(cfg, W, dtypes, np.asarray(inp)[None])[0]
    z = z - z.max(-1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return [-lp[p, t] for p, t in zip(pos, tgt)]


def check_ppl(tmp, tool, read_dir, check):
    toks = np.random.default_rng(13).integers(0, 97, 40).astype("<u4")
    path = os.path.join(tmp, "fam40.u32")
    toks.tofile(path)
    t = toks.astype(np.int64)
    for label in ("gemma2", "phi3-longrope", "mixtral", "qwen2_moe-sparse-step"):
        d = os.path.join(tmp, label)
        cfg, W, dtypes = read_dir(d)
        out = os.path.join(tmp, "fam.json")
        tool("reference_ppl.py", "--model", d, "--tokens", path, "--protocol", "hf-sliding", "--context", 24,
             "--stride", 12, "--json", out)
        j = json.load(open(out))
        nll = direct_nll(cfg, W, dtypes, t[0:24], range(23), t[1:24])
        nll += direct_nll(cfg, W, dtypes, t[12:36], range(11, 23), t[24:36])
        nll += direct_nll(cfg, W, dtypes, t[24:40], range(11, 15), t[36:40])
        check("%s hf-sliding N=40 C=24 S=12: 39 tokens, numpy NLL" % label,
              j["tokens_scored"] == 39 and abs(j["nll_sum"] - sum(nll)) < 1e-9 * abs(sum(nll)),
              "(%.12f vs %.12f)" % (j["nll_sum"], sum(nll)))
        tool("reference_ppl.py", "--model", d, "--tokens", path, "--protocol", "llama.cpp", "--context", 20,
             "--bos-id", 2, "--json", out)
        j = json.load(open(out))
        nll = []
        for s in (0, 20):
            inp = t[s:s + 20].copy()
            inp[0] = 2
            nll += direct_nll(cfg, W, dtypes, inp, range(10, 19), t[s + 11:s + 20])
        check("%s llama.cpp N=40 C=20 bos=2: 18 tokens, numpy NLL" % label,
              j["tokens_scored"] == 18 and abs(j["nll_sum"] - sum(nll)) < 1e-9 * abs(sum(nll)))


REFUSALS = [  # label of the checkpoint, config edit, words the message must name
    ("qwen3", lambda c: c.update(rope_scaling={"rope_type": "yarn", "factor": 4.0}), "rope_scaling.rope_type = 'yarn'"),
    ("qwen3", lambda c: c.update(use_sliding_window=True), "use_sliding_window"),
    ("gemma3", lambda c: c.update(vision_config={"model_type": "siglip_vision_model"}), "vision_config"),
    ("gemma3", lambda c: c.update(model_type="gemma3"), "model_type = 'gemma3'"),
    ("gemma3", lambda c: c.update(rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "rope_scaling.rope_type = 'dynamic'"),
    ("gemma2", lambda c: c.update(hidden_activation="gelu"), "hidden_activation = 'gelu'"),
    ("phi3", lambda c: c.update(rope_scaling={"type": "linear", "factor": 2.0}), "rope_scaling.rope_type = 'linear'"),
    ("phi3-longrope", lambda c: c["rope_scaling"].update(short_factor=[1.0]), "rope_scaling.short_factor"),
    ("mistral", lambda c: c.update(rope_scaling={"rope_type": "llama3", "factor": 8.0}), "rope_scaling.rope_type"),
    ("mixtral", lambda c: c.update(num_experts_per_tok=5), "num_experts_per_tok = 5"),
    ("qwen2_moe", lambda c: c.update(hidden_act="gelu"), "hidden_act = 'gelu'"),
    ("mistral", lambda c: c.update(model_type="qwen3", head_dim=8), "missing tensors"),
]


def check_refusals(tmp, tool, check):
    for i, (label, edit, words) in enumerate(REFUSALS):
        d = variant_config(tmp, label, edit)
        r = tool("reference_logits.py", "--model", d, "--ids", "1,2,3", "--out", os.path.join(tmp, "x.f32"), expect_ok=False)
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        check("family refusal %d (%s): names %s" % (i, label, words),
              r.returncode == 2 and words in msg and "Traceback" not in r.stderr, "-> %s" % msg[:150])
        os.remove(os.path.join(d, "config.json"))  # the next edit of this label starts again
    bad = [["--arch", "gemma2", "--tied"], ["--arch", "mistral", "--experts", "4"], ["--arch", "phi3", "--rope-scaling", "linear"],
           ["--arch", "mixtral", "--top-k", "5"], ["--arch", "llama", "--sliding-window", "4"],
           ["--arch", "qwen3", "--sliding-window", "4"], ["--arch", "qwen2_moe", "--mlp-only-layers", "x"]]
    for args in bad:
        r = tool("make_checkpoint.py", "--out", os.path.join(tmp, "x"), *args, expect_ok=False)
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        check("make_checkpoint rejects %s" % " ".join(args), r.returncode == 2 and "error:" in msg and "Traceback" not in r.stderr,
              "-> %s" % msg[:120])
    a = os.path.join(tmp, "again-mixtral")
    tool("make_checkpoint.py", "--out", a, "--seed", "5", "--arch", "mixtral")
    check("make_checkpoint deterministic for a family", open(os.path.join(a, "model.safetensors"), "rb").read()
          == open(os.path.join(tmp, "mixtral", "model.safetensors"), "rb").read())


def run(tmp, tool, read_dir, check):
    check_logits(tmp, tool, read_dir, check)
    check_window(tmp, check)
    check_features(tmp, check)
    check_ppl(tmp, tool, read_dir, check)
    check_refusals(tmp, tool, check)
