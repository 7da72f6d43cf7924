# SPDX-License-Identifier: MIT
"""Independent reference for ClusterPPL's native models, written with Debian's PyTorch.

It follows the published eager-mode modelling code of Hugging Face transformers
(LlamaForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel) operation by operation, so that the C++ agent's
logits can be checked against it without transformers installed (Debian 12 does not package it).
It also reads and writes safetensors the way the safetensors library does, without that package.

Used by the agent tests (tests/agent), the training tool (tools/train_byte_llama.py) and the eager-loop
benchmark (bench/). Run with /usr/bin/python3 (python3-torch).
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
           "I64": torch.int64, "I32": torch.int32}
_NAMES = {v: k for k, v in _DTYPES.items()}


# ----------------------------------------------------------------------------------------------
# safetensors: u64 little-endian header length, JSON header {name: {dtype, shape, data_offsets}},
# padded with spaces to a multiple of 8, then the raw little-endian tensor bytes.
# ----------------------------------------------------------------------------------------------
def save_safetensors(path, tensors, metadata=None):
    header = {}
    blobs = []
    offset = 0
    # The library orders tensors by alignment (dtype size, descending) and then by name.
    for name in sorted(tensors, key=lambda n: (-tensors[n].element_size(), n)):
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        dtype = _DTYPES[info["dtype"]]
        if dtype == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else torch.empty(0, dtype=dtype)
        else:
            t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def load_hf_dir(directory):
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(directory, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        for name in files:
            tensors.update(load_safetensors(os.path.join(directory, name)))
    else:
        tensors = load_safetensors(os.path.join(directory, "model.safetensors"))
    return config, tensors


# ----------------------------------------------------------------------------------------------
# Llama (and Qwen2: q/k/v biases) — transformers' LlamaForCausalLM, eager attention.
# ----------------------------------------------------------------------------------------------
def llama_inv_freq(config):
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    base = config.get("rope_theta", 10000.0)
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "llama3":
        factor = scaling["factor"]
        low = scaling["low_freq_factor"]
        high = scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wavelen = old / low
        high_wavelen = old / high
        wavelen = 2 * math.pi / inv_freq
        inv_llama = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(medium, smoothed, inv_llama)
    elif kind not in ("default", None):
        raise ValueError("unsupported rope_scaling " + str(kind))
    return inv_freq


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


class LlamaLayer(nn.Module):
    def __init__(self, c, qkv_bias, o_bias):
        super().__init__()
        h = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or h // self.heads
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=o_bias)
        mlp_bias = c.get("mlp_bias", False)
        self.gate_proj = nn.Linear(h, c["intermediate_size"], bias=mlp_bias)
        self.up_proj = nn.Linear(h, c["intermediate_size"], bias=mlp_bias)
        self.down_proj = nn.Linear(c["intermediate_size"], h, bias=mlp_bias)
        eps = c.get("rms_norm_eps", 1e-6)
        self.input_layernorm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        residual = x
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, T, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(B, T, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(B, T, -1, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        if rep > 1:  # repeat_kv
            k = k[:, :, None].expand(B, self.kv_heads, rep, T, self.head_dim).reshape(B, self.heads, T, self.head_dim)
            v = v[:, :, None].expand(B, self.kv_heads, rep, T, self.head_dim).reshape(B, self.heads, T, self.head_dim)
        w = torch.matmul(q, k.transpose(2, 3)) * (self.head_dim ** -0.5)
        w = w + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        a = torch.matmul(w, v).transpose(1, 2).reshape(B, T, -1)
        x = residual + self.o_proj(a)
        residual = x
        h = self.post_attention_layernorm(x)
        h = self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return residual + h


class LlamaRef(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config
        self.config = c
        qwen = c.get("model_type") == "qwen2"
        qkv_bias = qwen or c.get("attention_bias", False)
        o_bias = (not qwen) and c.get("attention_bias", False)
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([LlamaLayer(c, qkv_bias, o_bias) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c.get("rms_norm_eps", 1e-6))
        self.tied = c.get("tie_word_embeddings", False)
        if not self.tied:
            self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        self.register_buffer("inv_freq", llama_inv_freq(c), persistent=False)

    def forward(self, ids):
        B, T = ids.shape
        x = self.embed_tokens(ids)
        pos = torch.arange(T, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq.float())
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos().to(x.dtype)[None, None]
        sin = emb.sin().to(x.dtype)[None, None]
        mask = torch.full((T, T), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        x = self.norm(x)
        weight = self.embed_tokens.weight if self.tied else self.lm_head.weight
        return F.linear(x, weight).float()

    # This module keeps attention and MLP weights directly on each layer; transformers nests them
    # under self_attn. and mlp. These two maps translate between the layouts.
    _ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
    _MLP = ("gate_proj", "up_proj", "down_proj")

    @classmethod
    def _to_hf(cls, name):
        if name == "lm_head.weight":
            return name
        parts = name.split(".")
        if parts[0] == "layers" and parts[2] in cls._ATTN:
            parts.insert(2, "self_attn")
        elif parts[0] == "layers" and parts[2] in cls._MLP:
            parts.insert(2, "mlp")
        return "model." + ".".join(parts)

    @classmethod
    def _from_hf(cls, name):
        if name == "lm_head.weight":
            return name
        if not name.startswith("model."):
            raise KeyError("unexpected tensor " + name)
        parts = name[len("model."):].split(".")
        if parts[0] == "layers" and parts[2] in ("self_attn", "mlp"):
            del parts[2]
        return ".".join(parts)

    def hf_state_dict(self):
        """Parameters under transformers' names (model.layers.N.self_attn.q_proj.weight, ..., lm_head.weight)."""
        return {self._to_hf(name): p for name, p in self.state_dict().items()}

    def load_hf(self, tensors):
        own = {}
        for name, t in tensors.items():
            if name == "lm_head.weight" and self.tied:
                continue
            own[self._from_hf(name)] = t.float()
        self.load_state_dict(own, strict=True)


# ----------------------------------------------------------------------------------------------
# GPT-2 — transformers' GPT2LMHeadModel (Conv1D weights stored [in, out], gelu_new, tied head).
# ----------------------------------------------------------------------------------------------
def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Gpt2Ref(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = c = config
        self.n_embd = c["n_embd"]
        self.n_head = c["n_head"]
        self.eps = c.get("layer_norm_epsilon", 1e-5)
        self.params = nn.ParameterDict()

    def load_hf(self, tensors):
        for name, t in tensors.items():
            key = name[len("transformer."):] if name.startswith("transformer.") else name
            if key.endswith(".attn.bias") or key.endswith(".attn.masked_bias") or key == "lm_head.weight":
                continue  # causal-mask buffers of old checkpoints; the head is tied to wte
            self.params[key.replace(".", "__")] = nn.Parameter(t.float())

    def p(self, name):
        return self.params[name.replace(".", "__")]

    def forward(self, ids):
        B, T = ids.shape
        x = F.embedding(ids, self.p("wte.weight")) + F.embedding(torch.arange(T), self.p("wpe.weight"))
        hd = self.n_embd // self.n_head
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        for i in range(self.config["n_layer"]):
            pre = "h.%d." % i
            residual = x
            h = F.layer_norm(x, (self.n_embd,), self.p(pre + "ln_1.weight"), self.p(pre + "ln_1.bias"), self.eps)
            qkv = torch.addmm(self.p(pre + "attn.c_attn.bias"), h.reshape(-1, self.n_embd), self.p(pre + "attn.c_attn.weight"))
            q, k, v = qkv.view(B, T, 3 * self.n_embd).split(self.n_embd, dim=2)
            q = q.view(B, T, self.n_head, hd).permute(0, 2, 1, 3)
            k = k.view(B, T, self.n_head, hd).permute(0, 2, 1, 3)
            v = v.view(B, T, self.n_head, hd).permute(0, 2, 1, 3)
            w = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5, dtype=w_dtype(q))
            w = torch.where(mask, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
            w = F.softmax(w, dim=-1).type(v.dtype)
            a = torch.matmul(w, v).permute(0, 2, 1, 3).reshape(B, T, self.n_embd)
            a = torch.addmm(self.p(pre + "attn.c_proj.bias"), a.reshape(-1, self.n_embd), self.p(pre + "attn.c_proj.weight"))
            x = residual + a.view(B, T, self.n_embd)
            residual = x
            h = F.layer_norm(x, (self.n_embd,), self.p(pre + "ln_2.weight"), self.p(pre + "ln_2.bias"), self.eps)
            h = torch.addmm(self.p(pre + "mlp.c_fc.bias"), h.reshape(-1, self.n_embd), self.p(pre + "mlp.c_fc.weight"))
            h = gelu_new(h)
            h = torch.addmm(self.p(pre + "mlp.c_proj.bias"), h, self.p(pre + "mlp.c_proj.weight"))
            x = residual + h.view(B, T, self.n_embd)
        x = F.layer_norm(x, (self.n_embd,), self.p("ln_f.weight"), self.p("ln_f.bias"), self.eps)
        return F.linear(x, self.p("wte.weight")).float()


def w_dtype(t):
    return t.dtype


def load_model(directory):
    """Loads an HF directory into the matching reference module, eval mode: Llama, Qwen2, Mistral
    without a sliding window and GPT-2 in float32; the families of families_reference.py (Qwen3,
    Gemma 2/3, Phi-3, Mistral with a window, Mixtral, Qwen2-MoE) in float64."""
    config, tensors = load_hf_dir(directory)
    kind = config.get("model_type")
    if HERE not in sys.path:  # families_reference.py sits beside this file
        sys.path.insert(0, HERE)
    import families_reference  # here, not at the top: only those families need it
    if families_reference.uses_family_reference(config):
        return families_reference.FamilyRef(config, tensors).eval()
    if kind in ("llama", "mistral", "qwen2"):
        m = LlamaRef(config)
    elif kind == "gpt2":
        m = Gpt2Ref(config)
    else:
        raise ValueError("unsupported model_type %r" % kind)
    m.load_hf(tensors)
    return m.eval()
