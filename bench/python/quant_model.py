#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Issue 41's benchmark model and data: a random Llama in Hugging Face layout, its GGUF twin for
llama.cpp, and a byte-level text of N tokens.

  quant_model.py checkpoint --out DIR [--seed S]      config.json + model.safetensors (float32)
  quant_model.py gguf --model DIR --gguf-py PATH --out FILE.gguf
  quant_model.py text --source FILE --tokens N --out PREFIX   PREFIX.txt (N ASCII bytes) + PREFIX.u32

The shape is issue 41's "Figures to beat": hidden 1024, 8 layers, 16 query / 8 K/V heads,
intermediate 2816, vocabulary 512 (ids 0-255 are the bytes), untied head, about 95M parameters;
linear weights N(0, 1/fan_in), norm weights 1 + N(0, 0.1^2), embeddings N(0, 1), drawn with numpy's
PCG64 from --seed.

The GGUF holds the same float32 values under llama.cpp's names, with q and k rows reordered from
Hugging Face's rotate-half rotary layout to GGML's adjacent pairs (what llama.cpp's converter does for
Llama). Its vocabulary is byte-level BPE ("gpt2") with no useful merge: token i < 256 is byte i,
spelled with GPT-2's byte-to-unicode alphabet, so llama.cpp's tokenizer turns any ASCII text into
exactly its bytes; 256 is a control token used as BOS/EOS (never added: add_bos_token is false) and
257-511 are unused. The text is the source's first N bytes that are printable ASCII or newline, so
the agent's --tokenizer bytes and llama.cpp read the same N ids.
Needs numpy only (and gguf-py from the llama.cpp tree for `gguf`); run with /usr/bin/python3.
"""
import argparse
import json
import os
import struct
import sys
import types

import numpy as np

SHAPE = dict(hidden=1024, layers=8, heads=16, kv_heads=8, intermediate=2816, vocab=512)
BOS = 256


def config():
    s = SHAPE
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": s["hidden"],
            "intermediate_size": s["intermediate"], "num_hidden_layers": s["layers"],
            "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
            "vocab_size": s["vocab"], "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0, "tie_word_embeddings": False, "hidden_act": "silu",
            "bos_token_id": BOS, "eos_token_id": BOS, "torch_dtype": "float32"}


def tensors(seed):
    """Hugging Face names -> float32 arrays, in state-dict order."""
    s, rng = SHAPE, np.random.default_rng(seed)
    h, hd = s["hidden"], s["hidden"] // s["heads"]

    def normal(shape, std):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    def linear(out_f, in_f):
        return normal((out_f, in_f), in_f ** -0.5)

    def norm(n):
        return np.float32(1.0) + normal((n,), 0.1)

    t = {"model.embed_tokens.weight": normal((s["vocab"], h), 1.0)}
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = linear(s["heads"] * hd, h)
        t[p + "self_attn.k_proj.weight"] = linear(s["kv_heads"] * hd, h)
        t[p + "self_attn.v_proj.weight"] = linear(s["kv_heads"] * hd, h)
        t[p + "self_attn.o_proj.weight"] = linear(h, s["heads"] * hd)
        t[p + "mlp.gate_proj.weight"] = linear(s["intermediate"], h)
        t[p + "mlp.up_proj.weight"] = linear(s["intermediate"], h)
        t[p + "mlp.down_proj.weight"] = linear(h, s["intermediate"])
        t[p + "input_layernorm.weight"] = norm(h)
        t[p + "post_attention_layernorm.weight"] = norm(h)
    t["model.norm.weight"] = norm(h)
    t["lm_head.weight"] = linear(s["vocab"], h)
    return t


def write_safetensors(path, named):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, a in named.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for a in named.values():
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype="<f4").reshape(v["shape"])
            for k, v in header.items()}


def cmd_checkpoint(a):
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config(), f, indent=1)
    named = tensors(a.seed)
    write_safetensors(os.path.join(a.out, "model.safetensors"), named)
    print(json.dumps({"dir": a.out, "params": int(sum(x.size for x in named.values()))}))


def byte_alphabet():
    """GPT-2's byte-level alphabet: byte -> the printable character that spells it in a vocabulary."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def rope_pairs(w, heads):
    """Rows of each head from [first halves..., second halves...] to interleaved pairs (GGML's rope)."""
    rows, cols = w.shape
    hd = rows // heads
    return w.reshape(heads, 2, hd // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def gguf_names(c):
    yield "model.embed_tokens.weight", "token_embd.weight", None
    for i in range(c["num_hidden_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        yield p + "self_attn.q_proj.weight", b + "attn_q.weight", c["num_attention_heads"]
        yield p + "self_attn.k_proj.weight", b + "attn_k.weight", c["num_key_value_heads"]
        yield p + "self_attn.v_proj.weight", b + "attn_v.weight", None
        yield p + "self_attn.o_proj.weight", b + "attn_output.weight", None
        yield p + "mlp.gate_proj.weight", b + "ffn_gate.weight", None
        yield p + "mlp.up_proj.weight", b + "ffn_up.weight", None
        yield p + "mlp.down_proj.weight", b + "ffn_down.weight", None
        yield p + "input_layernorm.weight", b + "attn_norm.weight", None
        yield p + "post_attention_layernorm.weight", b + "ffn_norm.weight", None
    yield "model.norm.weight", "output_norm.weight", None
    yield "lm_head.weight", "output.weight", None


def cmd_gguf(a):
    # gguf-py imports sentencepiece for vocabularies this file does not use; Debian's python lacks it.
    sys.modules.setdefault("sentencepiece", types.SimpleNamespace(SentencePieceProcessor=None))
    sys.path.insert(0, a.gguf_py)
    import gguf  # noqa: E402
    with open(os.path.join(a.model, "config.json")) as f:
        c = json.load(f)
    named = read_safetensors(os.path.join(a.model, "model.safetensors"))
    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("clusterppl-bench-llama")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_dimension_count(c["hidden_size"] // c["num_attention_heads"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_vocab_size(c["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_vocab(w, gguf, c["vocab_size"])
    for hf, gg, heads in gguf_names(c):
        t = named[hf]
        w.add_tensor(gg, np.ascontiguousarray(rope_pairs(t, heads) if heads else t, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(json.dumps({"gguf": a.out, "tensors": len(named)}))


def add_vocab(w, gguf, vocab):
    alpha = byte_alphabet()
    tokens = [alpha[b] for b in range(256)] + ["<|bos|>"] + [f"<|unused{i}|>" for i in range(257, vocab)]
    types_ = ([gguf.TokenType.NORMAL] * 256 + [gguf.TokenType.CONTROL]
              + [gguf.TokenType.UNUSED] * (vocab - 257))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types_)
    # llama.cpp requires a merges list; this one joins two bytes (0x00 0x00) that ASCII text never
    # holds, and its result is no token, so it could not change a tokenization anyway.
    w.add_token_merges([alpha[0] + " " + alpha[0]])
    w.add_bos_token_id(BOS)
    w.add_eos_token_id(BOS)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)


def cmd_text(a):
    with open(a.source, "rb") as f:
        raw = f.read()
    keep = bytes(b for b in raw if b == 10 or 32 <= b < 127)[:a.tokens]
    if len(keep) < a.tokens:
        sys.exit(f"quant_model.py: {a.source} has only {len(keep)} ASCII bytes, {a.tokens} asked for")
    with open(a.out + ".txt", "wb") as f:
        f.write(keep)
    np.frombuffer(keep, dtype=np.uint8).astype("<u4").tofile(a.out + ".u32")
    print(json.dumps({"text": a.out + ".txt", "tokens": len(keep)}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("checkpoint")
    c.add_argument("--out", required=True)
    c.add_argument("--seed", type=int, default=0)
    g = sub.add_parser("gguf")
    g.add_argument("--model", required=True)
    g.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py directory")
    g.add_argument("--out", required=True)
    t = sub.add_parser("text")
    t.add_argument("--source", required=True)
    t.add_argument("--tokens", type=int, default=16384)
    t.add_argument("--out", required=True)
    a = p.parse_args()
    {"checkpoint": cmd_checkpoint, "gguf": cmd_gguf, "text": cmd_text}[a.cmd](a)


if __name__ == "__main__":
    main()
