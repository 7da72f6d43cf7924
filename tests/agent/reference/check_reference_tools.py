#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Cross-checks the Python reference tools against each other and against a second, independent
NumPy float64 transcription of the Llama/Qwen2/GPT-2 forward passes, and (check_families.py, with
np_families.py) of the issue-42 families: Qwen3, Gemma 2, Gemma 3, Phi-3, Mistral with a sliding
window, Mixtral, Qwen2-MoE.

Runs make_checkpoint.py, reference_logits.py, reference_ppl.py and trace_torchscript.py as
subprocesses (as the C++ tests do) in a temporary directory and prints one line per check.
Exit status 0 when all pass. Takes about three minutes on 2 cores. Run with /usr/bin/python3.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_families  # noqa: E402
PY = sys.executable or "/usr/bin/python3"
FAILED = []


def tool(name, *args, expect_ok=True):
    r = subprocess.run([PY, os.path.join(HERE, name)] + [str(x) for x in args], capture_output=True, text=True)
    if expect_ok and r.returncode != 0:
        raise AssertionError("%s %s failed (%d): %s" % (name, " ".join(map(str, args)), r.returncode, r.stderr[-2000:]))
    return r


def check(label, cond, detail=""):
    print("%s %s %s" % ("PASS" if cond else "FAIL", label, detail))
    if not cond:
        FAILED.append(label)


# ------------------------------------------------------------------------------------------------
# safetensors, read independently of hf_reference (NumPy only)
# ------------------------------------------------------------------------------------------------
NP = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4"}


def read_st(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out, dtypes = {}, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[8 + n + b:8 + n + e]
        if info["dtype"] == "BF16":
            u = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
            arr = u.view("<f4")
        else:
            arr = np.frombuffer(raw, NP[info["dtype"]])
        out[name] = arr.astype(np.float64).reshape(info["shape"])
        dtypes[name] = info["dtype"]
    return out, dtypes, header


def read_dir(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    idx = os.path.join(d, "model.safetensors.index.json")
    tensors, dtypes = {}, {}
    if os.path.exists(idx):
        for f in sorted(set(json.load(open(idx))["weight_map"].values())):
            t, dt, _ = read_st(os.path.join(d, f))
            tensors.update(t)
            dtypes.update(dt)
    else:
        tensors, dtypes, _ = read_st(os.path.join(d, "model.safetensors"))
    return cfg, tensors, dtypes


# ------------------------------------------------------------------------------------------------
# Independent NumPy float64 forward passes
# ------------------------------------------------------------------------------------------------
def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def np_llama(cfg, W, ids):
    B, T = ids.shape
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or H // nh
    eps = cfg["rms_norm_eps"]
    theta = cfg.get("rope_theta", 10000.0)
    freqs = [1.0 / theta ** (2 * i / hd) for i in range(hd // 2)]
    rs = cfg.get("rope_scaling")
    if rs:  # Meta's llama3 apply_scaling
        assert rs["rope_type"] == "llama3"
        lo, hi, fac, old = rs["low_freq_factor"], rs["high_freq_factor"], rs["factor"], rs["original_max_position_embeddings"]
        new = []
        for f in freqs:
            wl = 2 * math.pi / f
            if wl < old / hi:
                new.append(f)
            elif wl > old / lo:
                new.append(f / fac)
            else:
                s = (old / wl - lo) / (hi - lo)
                new.append((1 - s) * f / fac + s * f)
        freqs = new
    ang = np.arange(T)[:, None] * np.array(freqs, dtype=np.float32).astype(np.float64)[None]  # [T, hd/2]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(x):  # x [B, T, h, hd], rotate pairs (i, i + hd/2)
        x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
        c, s = cos[None, :, None], sin[None, :, None]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def lin(x, name):
        y = x @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    x = W["model.embed_tokens.weight"][ids]
    causal = np.tril(np.ones((T, T), bool))
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rms(x, W[p + "input_layernorm.weight"])
        q = rope(lin(h, p + "self_attn.q_proj").reshape(B, T, nh, hd))
        k = rope(lin(h, p + "self_attn.k_proj").reshape(B, T, nkv, hd))
        v = lin(h, p + "self_attn.v_proj").reshape(B, T, nkv, hd)
        out = np.zeros((B, T, nh, hd))
        for j in range(nh):
            g = j // (nh // nkv)
            s = np.einsum("btd,bud->btu", q[:, :, j], k[:, :, g]) / math.sqrt(hd)
            s = np.where(causal[None], s, -np.inf)
            out[:, :, j] = np.einsum("btu,bud->btd", softmax(s), v[:, :, g])
        x = x + lin(out.reshape(B, T, nh * hd), p + "self_attn.o_proj")
        h = rms(x, W[p + "post_attention_layernorm.weight"])
        gt = lin(h, p + "mlp.gate_proj")
        x = x + lin(gt / (1 + np.exp(-gt)) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms(x, W["model.norm.weight"])
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    return x @ head.T


def np_gpt2(cfg, W, ids):
    W = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in W.items()}
    B, T = ids.shape
    E, nh = cfg["n_embd"], cfg["n_head"]
    hd = E // nh
    eps = cfg["layer_norm_epsilon"]

    def ln(x, p):
        m = x.mean(-1, keepdims=True)
        var = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(var + eps) * W[p + ".weight"] + W[p + ".bias"]

    def conv1d(x, p):  # weight stored [in, out]
        return x @ W[p + ".weight"] + W[p + ".bias"]

    x = W["wte.weight"][ids] + W["wpe.weight"][np.arange(T)][None]
    causal = np.tril(np.ones((T, T), bool))
    for i in range(cfg["n_layer"]):
        p = "h.%d." % i
        qkv = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn")
        q, k, v = (qkv[..., j * E:(j + 1) * E].reshape(B, T, nh, hd) for j in range(3))
        s = np.einsum("bthd,buhd->bhtu", q, k) / math.sqrt(hd)
        s = np.where(causal[None, None], s, -np.inf)
        a = np.einsum("bhtu,buhd->bthd", softmax(s), v).reshape(B, T, E)
        x = x + conv1d(a, p + "attn.c_proj")
        h = conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
        x = x + conv1d(h, p + "mlp.c_proj")
    return ln(x, "ln_f") @ W["wte.weight"].T


# ------------------------------------------------------------------------------------------------
VARIANTS = [
    ("llama-f32", ["--arch", "llama"]),
    ("llama-f16", ["--arch", "llama", "--dtype", "F16"]),
    ("llama-bf16", ["--arch", "llama", "--dtype", "BF16"]),
    ("llama-sharded", ["--arch", "llama", "--sharded"]),
    ("llama-tied", ["--arch", "llama", "--tied"]),
    ("llama-gqa", ["--arch", "llama", "--gqa"]),
    ("llama-llama3", ["--arch", "llama", "--rope-scaling", "llama3", "--rope-theta", "500000"]),
    ("llama-llama3-orig64", ["--arch", "llama", "--rope-scaling", "llama3", "--rope-original-max", "64"]),
    ("llama-bias", ["--arch", "llama", "--attention-bias"]),
    ("llama-headdim", ["--arch", "llama", "--head-dim", "16", "--kv-heads", "1"]),
    ("llama-all", ["--arch", "llama", "--dtype", "BF16", "--sharded", "--tied", "--gqa", "--rope-scaling", "llama3",
                   "--attention-bias", "--layers", "3"]),
    ("qwen2", ["--arch", "qwen2"]),
    ("qwen2-gqa-tied-bf16-sharded", ["--arch", "qwen2", "--gqa", "--tied", "--dtype", "BF16", "--sharded"]),
    ("gpt2", ["--arch", "gpt2"]),
    ("gpt2-f16-sharded", ["--arch", "gpt2", "--dtype", "F16", "--sharded"]),
    ("gpt2-prefix-buffers", ["--arch", "gpt2", "--gpt2-prefix", "--gpt2-mask-buffers"]),
]


def check_checkpoints(tmp):
    rng = np.random.default_rng(7)
    for label, args in VARIANTS:
        d = os.path.join(tmp, label)
        info = json.loads(tool("make_checkpoint.py", "--out", d, "--seed", "3", *args).stdout)
        cfg, W, dtypes = read_dir(d)
        want = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
        dt = args[args.index("--dtype") + 1] if "--dtype" in args else "F32"
        ok = cfg["torch_dtype"] == want[dt] and set(dtypes.values()) == {dt}
        if "--sharded" in args:
            idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
            files = sorted(set(idx["weight_map"].values()))
            sizes = sum(int(np.prod(t.shape)) * {"F32": 4, "F16": 2, "BF16": 2}[dtypes[n]] for n, t in W.items())
            ok = ok and files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"] \
                and idx["metadata"]["total_size"] == sizes and set(idx["weight_map"]) == set(W) \
                and not os.path.exists(os.path.join(d, "model.safetensors"))
            for f in files:
                _, _, hdr = read_st(os.path.join(d, f))
                ok = ok and set(k for k in hdr if k != "__metadata__") == {n for n, v in idx["weight_map"].items() if v == f}
        if cfg["model_type"] != "gpt2":
            ok = ok and (("lm_head.weight" in W) != bool(cfg["tie_word_embeddings"]))
        check("checkpoint %s: dtype/files/index/tied" % label, ok, "(%d tensors)" % info["tensors"])
        B, T = 2, 11
        ids = rng.integers(0, cfg["vocab_size"], (B, T))
        out = os.path.join(tmp, label + ".f32")
        r = tool("reference_logits.py", "--model", d, "--ids", ";".join(",".join(map(str, row)) for row in ids),
                 "--out", out)
        shape = json.loads(r.stdout)["shape"]
        got = np.fromfile(out, "<f4").reshape(shape)
        ref = (np_gpt2 if cfg["model_type"] == "gpt2" else np_llama)(cfg, W, ids)
        err = np.abs(got - ref).max()
        check("logits %s vs independent numpy float64" % label, shape == [B, T, cfg["vocab_size"]] and err < 2e-4,
              "(max |diff| %.2e, logit std %.2f)" % (err, ref.std()))
    # Same seed, different stored dtype: BF16 logits differ from F32 (values really are rounded).
    a = np.fromfile(os.path.join(tmp, "llama-f32.f32"), "<f4")
    b = np.fromfile(os.path.join(tmp, "llama-bf16.f32"), "<f4")
    check("bf16 checkpoint differs from f32 checkpoint (rounded values)", np.abs(a - b).max() > 1e-3)
    # Determinism: same seed -> identical bytes.
    d2 = os.path.join(tmp, "again")
    tool("make_checkpoint.py", "--out", d2, "--seed", "3", "--arch", "llama")
    same = open(os.path.join(d2, "model.safetensors"), "rb").read() == \
        open(os.path.join(tmp, "llama-f32", "model.safetensors"), "rb").read()
    check("make_checkpoint deterministic for a seed", same)
    # Rewriting a sharded directory as single-file removes the old shards and index.
    tool("make_checkpoint.py", "--out", os.path.join(tmp, "llama-sharded"), "--arch", "llama")
    check("rewrite removes stale shards", sorted(os.listdir(os.path.join(tmp, "llama-sharded"))) ==
          ["config.json", "model.safetensors"])


def ppl_json(tmp, *args):
    out = os.path.join(tmp, "ppl.json")
    tool("reference_ppl.py", *args, "--json", out)
    return json.load(open(out))


def direct_nll(cfg, W, inp, pos, tgt):
    fwd = np_gpt2 if cfg["model_type"] == "gpt2" else np_llama
    z = fwd(cfg, W, np.asarray(inp)[None])[0]
    z = z - z.max(-1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return [-lp[p, t] for p, t in zip(pos, tgt)]


def check_ppl(tmp):
    rng = np.random.default_rng(11)
    toks = rng.integers(0, 97, 300).astype("<u4")
    u32 = os.path.join(tmp, "t300.u32")
    toks.tofile(u32)
    toks.astype("<u2").tofile(os.path.join(tmp, "t300.u16"))
    np.save(os.path.join(tmp, "t300.npy"), toks.astype(np.int64))
    t10, t20 = os.path.join(tmp, "t10.u32"), os.path.join(tmp, "t20.u32")
    toks[:10].tofile(t10)
    toks[:20].tofile(t20)
    r = tool("reference_ppl.py", "--self-test")
    check("reference_ppl --self-test", r.returncode == 0)

    for arch in ("llama-gqa", "gpt2"):
        d = os.path.join(tmp, arch)
        cfg, W, _ = read_dir(d)
        t = toks.astype(np.int64)
        j = ppl_json(tmp, "--model", d, "--tokens", t10, "--protocol", "hf-sliding", "--context", 4, "--stride", 4)
        nll = []
        for b, e in ((0, 4), (4, 8), (8, 10)):  # hand-worked: windows score [b+1, e)
            nll += direct_nll(cfg, W, t[b:e], range(0, e - b - 1), t[b + 1:e])
        check("%s hf-sliding N=10 C=4 S=4: 7 tokens, numpy NLL" % arch,
              j["tokens_scored"] == 7 and j["windows"] == 3 and abs(j["nll_sum"] - sum(nll)) < 1e-3,
              "(%.6f vs %.6f)" % (j["nll_sum"], sum(nll)))
        j = ppl_json(tmp, "--model", d, "--tokens", t10, "--protocol", "hf-sliding", "--context", 6, "--stride", 2)
        nll = direct_nll(cfg, W, t[0:6], range(0, 5), t[1:6])  # [0,6) scores 1..5
        nll += direct_nll(cfg, W, t[2:8], range(3, 5), t[6:8])  # [2,8) scores 6,7
        nll += direct_nll(cfg, W, t[4:10], range(3, 5), t[8:10])  # [4,10) scores 8,9; end == n
        check("%s hf-sliding N=10 C=6 S=2 (overlap): 9 tokens, numpy NLL" % arch,
              j["tokens_scored"] == 9 and j["windows"] == 3 and abs(j["nll_sum"] - sum(nll)) < 1e-3)
        for bos in (None, 5):
            args = ["--bos-id", bos] if bos is not None else []
            j = ppl_json(tmp, "--model", d, "--tokens", t20, "--protocol", "llama.cpp", "--context", 8, *args)
            nll = []
            for s in (0, 8):
                inp = t[s:s + 8].copy()
                if bos is not None:
                    inp[0] = bos
                nll += direct_nll(cfg, W, inp, range(4, 7), t[s + 5:s + 8])
            check("%s llama.cpp N=20 C=8 bos=%s: 6 tokens, numpy NLL" % (arch, bos),
                  j["tokens_scored"] == 6 and j["windows"] == 2 and abs(j["nll_sum"] - sum(nll)) < 1e-3)
        # lm-eval with C >= N: one window, [prefix] + all but the last token.
        j = ppl_json(tmp, "--model", d, "--tokens", t20, "--protocol", "lm-eval-rolling", "--context", 32, "--bos-id", 7)
        nll = direct_nll(cfg, W, np.concatenate([[7], t[:19]]), range(20), t[:20])
        check("%s lm-eval-rolling N=20 C=32: 20 tokens, numpy NLL" % arch,
              j["tokens_scored"] == 20 and j["windows"] == 1 and abs(j["nll_sum"] - sum(nll)) < 1e-3)
        j = ppl_json(tmp, "--model", d, "--tokens", t20, "--protocol", "lm-eval-rolling", "--context", 8)
        nll = direct_nll(cfg, W, np.concatenate([[0], t[:7]]), range(8), t[:8])
        nll += direct_nll(cfg, W, t[7:15], range(8), t[8:16])
        nll += direct_nll(cfg, W, t[11:19], range(4, 8), t[16:20])
        check("%s lm-eval-rolling N=20 C=8: 3 windows, numpy NLL" % arch,
              j["tokens_scored"] == 20 and j["windows"] == 3 and abs(j["nll_sum"] - sum(nll)) < 1e-3)

        # Token file formats agree; every protocol on 300 tokens; TorchScript gives the same result.
        pt = os.path.join(tmp, arch + ".pt")
        r = json.loads(tool("trace_torchscript.py", "--model", d, "--out", pt, "--batch", 2, "--length", 16).stdout)
        check("%s torchscript: all tested shapes match eager" % arch, r["dynamic_shapes"], json.dumps(r["supported_shapes"]))
        for proto, extra, n_scored in (("hf-sliding", ["--context", 32, "--stride", 8], 299),
                                       ("hf-sliding", ["--context", 32], 300 - 10),
                                       ("llama.cpp", ["--context", 32, "--bos-id", 1], 9 * 15),
                                       ("lm-eval-rolling", ["--context", 16], 300)):
            res = [ppl_json(tmp, "--model", d, "--tokens", os.path.join(tmp, "t300" + ext), "--protocol", proto, *extra)
                   for ext in (".u32", ".u16", ".npy")]
            res.append(ppl_json(tmp, "--torchscript", pt, "--tokens", u32, "--protocol", proto, *extra))
            check("%s %s %s: %d tokens; u32 = u16 = npy = torchscript" % (arch, proto, extra, n_scored),
                  all(x == res[0] for x in res) and res[0]["tokens_scored"] == n_scored,
                  "(ppl %.4f)" % res[0]["ppl"])
        j = ppl_json(tmp, "--model", d, "--tokens", u32, "--protocol", "lm-eval-rolling", "--context", 16,
                     "--max-windows", 3)
        check("%s --max-windows 3" % arch, j["windows"] == 3 and j["tokens_scored"] == 48)


def check_errors(tmp):
    bad = os.path.join(tmp, "bad.u32")
    with open(bad, "wb") as f:
        f.write(b"\x01\x02\x03")
    big = os.path.join(tmp, "big.u32")
    np.array([1, 2, 500], "<u4").tofile(big)
    d = os.path.join(tmp, "llama-f32")
    cases = [
        ("make_checkpoint.py", ["--arch", "gpt2", "--gqa", "--out", os.path.join(tmp, "x")]),
        ("make_checkpoint.py", ["--arch", "llama", "--heads", "3", "--out", os.path.join(tmp, "x")]),
        ("make_checkpoint.py", ["--arch", "bert", "--out", os.path.join(tmp, "x")]),
        ("reference_logits.py", ["--model", d, "--ids", "1,2;3", "--out", os.path.join(tmp, "x.f32")]),
        ("reference_logits.py", ["--model", d, "--ids", "1,200", "--out", os.path.join(tmp, "x.f32")]),
        ("reference_logits.py", ["--model", os.path.join(tmp, "nope"), "--ids", "1", "--out", os.path.join(tmp, "x")]),
        ("reference_ppl.py", ["--model", d, "--tokens", bad, "--protocol", "hf-sliding", "--context", "4",
                              "--json", os.path.join(tmp, "x.json")]),
        ("reference_ppl.py", ["--model", d, "--tokens", big, "--protocol", "hf-sliding", "--context", "4",
                              "--json", os.path.join(tmp, "x.json")]),
        ("reference_ppl.py", ["--model", d, "--tokens", os.path.join(tmp, "t10.u32"), "--protocol", "llama.cpp",
                              "--context", "16", "--json", os.path.join(tmp, "x.json")]),
        ("reference_ppl.py", ["--model", d, "--tokens", os.path.join(tmp, "t10.u32"), "--protocol", "lm-eval-rolling",
                              "--context", "4", "--stride", "2", "--json", os.path.join(tmp, "x.json")]),
        ("reference_ppl.py", ["--model", os.path.join(tmp, "gpt2"), "--tokens", os.path.join(tmp, "t300.u32"),
                              "--protocol", "hf-sliding", "--context", "128", "--json", os.path.join(tmp, "x.json")]),
    ]
    for name, args in cases:
        r = tool(name, *args, expect_ok=False)
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        check("rejects: %s %s" % (name, " ".join(a for a in args if not a.startswith(tmp))),
              r.returncode != 0 and "error:" in msg and "Traceback" not in r.stderr,
              "-> %s" % msg[:120])


def run_all(tmp):
    check_checkpoints(tmp)
    check_ppl(tmp)
    check_errors(tmp)
    check_families.run(tmp, tool, read_dir, check)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", help="work in this directory instead of a temporary one")
    a = p.parse_args()
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        tmp = a.keep
        run_all(tmp)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            run_all(tmp)
    print("%d failed" % len(FAILED) if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
