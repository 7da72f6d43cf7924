# SPDX-License-Identifier: MIT
"""Float64 references for the families of issue 42: Qwen3, Gemma 2, Gemma 3 (text), Phi-3, Mistral with
a sliding window, Mixtral and Qwen2-MoE.

Written from the published architectures (transformers' modeling_qwen3, modeling_gemma2,
modeling_gemma3 (Gemma3ForCausalLM), modeling_phi3, modeling_mistral, modeling_mixtral,
modeling_qwen2_moe, eager attention, and the configs their checkpoints carry), op by op, but
computed in float64 from the stored weights so that the agent's float32 result can be checked
against it. Where transformers fixes a value in a lower precision on purpose, the reference takes
that value and computes exactly from there:
  * rotary inverse frequencies are formed in float32 as transformers forms them (default, linear,
    longrope), the angle t * inv_freq is the float32 product, its cos/sin are float64;
  * Gemma's embedding scale sqrt(hidden_size) is rounded to the dtype the checkpoint stores
    model.embed_tokens.weight in (transformers multiplies by it in the weights' dtype: 45.25 for
    hidden 2048 in bfloat16, not 45.2548...).
Everything else (norms, attention, softmax, soft-capping, routing, experts) is float64.

Decisions a C++ implementation must share (docs: tests/agent/reference/README.md):
  * Sliding window W (transformers' masking_utils: causal AND kv_idx > q_idx - W): a query at
    position t sees the keys at positions max(0, t - W + 1) .. t, i.e. W keys counting itself.
  * MoE routing: softmax over all experts (float64), the top-k by probability with ties broken
    by the lower expert index, Mixtral always renormalises the k weights, Qwen2-MoE only with
    norm_topk_prob; Qwen2-MoE adds sigmoid(shared_expert_gate(x)) * shared_expert(x).
  * Phi-3 longrope: the long factors when the forward's length T exceeds
    original_max_position_embeddings (transformers' dynamic update uses max(position_ids) + 1),
    else the short ones; cos and sin are both multiplied by the attention factor.
A config with a feature that is not built here is refused with the field named (ValueError).
Run with /usr/bin/python3 (python3-torch).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

F64 = torch.float64
FAMILIES = ("qwen3", "gemma2", "gemma3_text", "phi3", "mistral", "mixtral", "qwen2_moe")
_GEMMA = ("gemma2", "gemma3_text")
_LLAMA_NORM = ("qwen3", "phi3", "mistral", "mixtral", "qwen2_moe")
# Rotary scaling each family's configs use that is built here; anything else is refused.
_ROPE_TYPES = {"qwen3": ("default",), "gemma2": ("default",), "gemma3_text": ("default", "linear"),
               "phi3": ("default", "longrope"), "mistral": ("default",), "mixtral": ("default",),
               "qwen2_moe": ("default",)}


def refuse(family, field, value, supported):
    raise ValueError("config.json: %s = %s is not supported for model_type %s (supported: %s)"
                     % (field, _show(value), family, supported))


def _show(value):
    return "null" if value is None else ("%r" % (value,)).replace("True", "true").replace("False", "false")


# ----------------------------------------------------------------------------------------------
# Rotary tables
# ----------------------------------------------------------------------------------------------
class Rope:
    """One rotary table: float32 inverse frequencies as transformers forms them (for longrope a
    short and a long set), the rotated width and the attention factor that scales cos and sin."""

    def __init__(self, base, rot_dim, scaling=None, factor_set=None, original_max=None, attention_factor=1.0):
        shape = torch.arange(0, rot_dim, 2, dtype=torch.int64).float() / rot_dim
        if factor_set is None:
            inv = 1.0 / (base ** shape)
            if scaling is not None:  # "linear": positions divided by factor, i.e. inv_freq / factor
                inv = inv / scaling
            self.short, self.long = inv, None
        else:
            short, long = factor_set
            self.short = 1.0 / (torch.tensor(short, dtype=torch.float32) * base ** shape)
            self.long = 1.0 / (torch.tensor(long, dtype=torch.float32) * base ** shape)
        self.rot_dim = rot_dim
        self.original_max = original_max
        self.attention_factor = attention_factor

    def tables(self, T):
        """cos, sin [T, rot_dim] in float64 for positions 0..T-1."""
        inv = self.short
        if self.long is not None and T > self.original_max:
            inv = self.long
        angle = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]  # the float32 product
        angle = torch.cat((angle, angle), dim=-1).to(F64)
        return angle.cos() * self.attention_factor, angle.sin() * self.attention_factor


def rope_type(scaling):
    if not scaling:
        return "default"
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    return "longrope" if kind == "su" else kind


def longrope(c, fam, base, rot_dim):
    s = c["rope_scaling"]
    for key in ("short_factor", "long_factor"):
        if not isinstance(s.get(key), list) or len(s[key]) != rot_dim // 2:
            refuse(fam, "rope_scaling.%s" % key, s.get(key), "a list of %d numbers" % (rot_dim // 2))
    original = c.get("original_max_position_embeddings") or s.get("original_max_position_embeddings")
    if not original:
        refuse(fam, "original_max_position_embeddings", None, "the pre-training length longrope scales from")
    factor = c["max_position_embeddings"] / original
    attention = s.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    return Rope(base, rot_dim, factor_set=(s["short_factor"], s["long_factor"]), original_max=original,
                attention_factor=attention)


def build_ropes(c, fam, hd):
    """{"global": Rope, "local": Rope}; only Gemma 3 has a distinct local table."""
    scaling = c.get("rope_scaling")
    kind = rope_type(scaling)
    if kind not in _ROPE_TYPES[fam]:
        refuse(fam, "rope_scaling.rope_type", kind, ", ".join(_ROPE_TYPES[fam]))
    prf = c.get("partial_rotary_factor", 1.0)
    if prf != 1.0 and fam != "phi3":
        refuse(fam, "partial_rotary_factor", prf, "1.0")
    rot_dim = int(hd * prf)
    if rot_dim < 2 or rot_dim % 2:
        refuse(fam, "partial_rotary_factor", prf, "a factor giving an even rotary width >= 2")
    base = float(c.get("rope_theta", 10000.0))
    if kind == "longrope":
        main = longrope(c, fam, base, rot_dim)
    else:
        main = Rope(base, rot_dim, scaling=float(scaling["factor"]) if kind == "linear" else None)
    local = main
    if fam == "gemma3_text":
        local = Rope(float(c.get("rope_local_base_freq", 10000.0)), rot_dim)
    return {"global": main, "local": local}


def rotate(x, cos, sin, rot_dim):
    """transformers' apply_rotary_pos_emb on the first rot_dim features (rotate_half pairs i, i + rot_dim/2)."""
    r, rest = x[..., :rot_dim], x[..., rot_dim:]
    half = rot_dim // 2
    turned = torch.cat((-r[..., half:], r[..., :half]), dim=-1)
    return torch.cat((r * cos + turned * sin, rest), dim=-1)


# ----------------------------------------------------------------------------------------------
# The configuration, read and checked once
# ----------------------------------------------------------------------------------------------
class Spec:
    """What the forward needs from config.json, with each family's defaults applied."""

    def __init__(self, c):
        fam = c.get("model_type")
        if c.get("vision_config") is not None:
            raise ValueError("config.json: vision_config is present: a vision tower is not supported for model_type %s "
                             "(supported: text-only checkpoints, e.g. model_type gemma3_text)" % fam)
        if fam == "gemma3":
            refuse(fam, "model_type", fam, "gemma3_text: the text model (Gemma3ForCausalLM) without the vision tower")
        if fam not in FAMILIES:
            raise ValueError("config.json: model_type %r is not one of %s" % (fam, ", ".join(FAMILIES)))
        self.family = fam
        self.H, self.V, self.L = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads") or self.nh
        self.hd = c.get("head_dim") or self.H // self.nh
        if self.nh % self.nkv:
            refuse(fam, "num_key_value_heads", self.nkv, "a divisor of num_attention_heads")
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        self.gemma = fam in _GEMMA
        self.qk_norm = fam in ("qwen3", "gemma3_text")
        self.fused = fam == "phi3"
        self.tied = bool(c.get("tie_word_embeddings", self.gemma))
        self._attention(c, fam)
        self._activation(c, fam)
        self.ropes = build_ropes(c, fam, self.hd)
        self.layer_types = self._layer_types(c, fam)
        self.windows = self._windows(c, fam)
        self.mlps = self._mlps(c, fam)

    def _attention(self, c, fam):
        bias = bool(c.get("attention_bias", False))
        if bias and fam not in ("qwen3",) + _GEMMA:
            refuse(fam, "attention_bias", True, "false or absent")
        self.qkv_bias = bias or fam == "qwen2_moe"  # Qwen2-MoE: q/k/v biases always, as Qwen2
        self.o_bias = bias
        self.scale = float(c.get("query_pre_attn_scalar", 256)) ** -0.5 if self.gemma else self.hd ** -0.5
        self.attn_cap = c.get("attn_logit_softcapping") if self.gemma else None
        self.final_cap = c.get("final_logit_softcapping") if self.gemma else None
        if c.get("use_bidirectional_attention"):
            refuse(fam, "use_bidirectional_attention", True, "false or absent")

    def _activation(self, c, fam):
        field = "hidden_activation" if self.gemma else "hidden_act"
        want = "gelu_pytorch_tanh" if self.gemma else "silu"
        act = c.get(field) or (c.get("hidden_act") if self.gemma else None) or want
        if act != want:
            refuse(fam, field, act, want)

    def _layer_types(self, c, fam):
        L = self.L
        if self.gemma and c.get("layer_types") is not None:
            types = list(c["layer_types"])
            if len(types) != L or not set(types) <= {"sliding_attention", "full_attention"}:
                refuse(fam, "layer_types", types, "%d of sliding_attention / full_attention" % L)
            return types
        if fam == "gemma2":  # even layers slide
            return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(L)]
        if fam == "gemma3_text":
            pattern = int(c.get("sliding_window_pattern", 6))
            if pattern < 1:
                refuse(fam, "sliding_window_pattern", pattern, "an integer >= 1")
            return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(L)]
        return ["full_attention"] * L

    def _windows(self, c, fam):
        W = c.get("sliding_window")
        if fam in ("qwen3", "qwen2_moe"):
            if c.get("use_sliding_window"):
                refuse(fam, "use_sliding_window", True, "false")
            return [None] * self.L
        if W is not None and (not isinstance(W, int) or W < 1):
            refuse(fam, "sliding_window", W, "null or an integer >= 1")
        if self.gemma:
            return [W if t == "sliding_attention" else None for t in self.layer_types]
        return [W] * self.L  # mistral, mixtral, phi3: every layer

    def _mlps(self, c, fam):
        if fam == "mixtral":
            self.experts, self.top_k = c["num_local_experts"], c["num_experts_per_tok"]
            self.norm_topk = True
            kinds = ["mixtral"] * self.L
        elif fam == "qwen2_moe":
            self.experts, self.top_k = c["num_experts"], c["num_experts_per_tok"]
            self.norm_topk = bool(c.get("norm_topk_prob", False))
            step, only = int(c.get("decoder_sparse_step", 1)), set(c.get("mlp_only_layers") or [])
            kinds = ["qwen2_moe" if i not in only and self.experts > 0 and (i + 1) % step == 0 else "dense"
                     for i in range(self.L)]
        else:
            return ["dense"] * self.L
        if not 1 <= self.top_k <= self.experts:
            refuse(fam, "num_experts_per_tok", self.top_k, "1 .. %d (the number of experts)" % self.experts)
        return kinds


# ----------------------------------------------------------------------------------------------
# The forward pass
# ----------------------------------------------------------------------------------------------
def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def softcap(x, cap):
    return x if cap is None else torch.tanh(x / cap) * cap


def window_mask(T, W):
    """True where query t may see key s: s <= t and (no window or s > t - W)."""
    t = torch.arange(T)[:, None]
    s = torch.arange(T)[None, :]
    allowed = s <= t
    if W is not None:
        allowed = allowed & (s > t - W)
    return allowed


def router_probs(h, gate):
    """softmax(h @ gate^T) [N, E], where equal router rows give bit-equal logits: each distinct row
    is multiplied once and copied (a GEMM may sum a row at the matrix edge in another order, and
    an exact tie must stay exact to be broken by index)."""
    rows, inverse = torch.unique(gate, dim=0, return_inverse=True)
    return torch.softmax((h @ rows.t())[:, inverse], dim=-1)


def route(h, gate, top_k, normalise):
    """Expert indices [N, k] and weights [N, k]: softmax, top-k with ties to the lower index."""
    probs = router_probs(h, gate)
    ordered, index = torch.sort(probs, dim=-1, descending=True, stable=True)
    weights, chosen = ordered[:, :top_k], index[:, :top_k]
    if normalise:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return chosen, weights


class FamilyRef(nn.Module):
    """A checkpoint of one of FAMILIES as a float64 module: int64 ids [B, T] -> float64 logits [B, T, V]."""

    def __init__(self, config, tensors):
        super().__init__()
        self.config = config
        self.spec = s = Spec(config)
        embed = tensors.get("model.embed_tokens.weight")
        if embed is None:
            raise KeyError("missing tensor model.embed_tokens.weight")
        self.embed_scale = None
        if s.gemma:  # sqrt(hidden) in the embedding's dtype, as transformers multiplies by it
            self.embed_scale = float(torch.tensor(s.H ** 0.5, dtype=embed.dtype))
        self.w = self._load(tensors)
        self.trace = None

    # -- weights -----------------------------------------------------------------------------
    def expected(self):
        """Tensor name -> shape, as the family's checkpoints store them."""
        s = self.spec
        H, hd, I = s.H, s.hd, self.config.get("intermediate_size")
        out = {"model.embed_tokens.weight": (s.V, H), "model.norm.weight": (H,)}
        if not s.tied:
            out["lm_head.weight"] = (s.V, H)
        for i in range(s.L):
            p = "model.layers.%d." % i
            out.update(self._attention_shapes(p, H, hd))
            norms = ["input_layernorm", "post_attention_layernorm"]
            if s.gemma:
                norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
            for n in norms:
                out[p + n + ".weight"] = (H,)
            out.update(self._mlp_shapes(p, s.mlps[i], H, I))
        return out

    def _attention_shapes(self, p, H, hd):
        s = self.spec
        nq, nk = s.nh * hd, s.nkv * hd
        out = {p + "self_attn.o_proj.weight": (H, nq)}
        if s.fused:
            out[p + "self_attn.qkv_proj.weight"] = (nq + 2 * nk, H)
        else:
            for name, rows in (("q_proj", nq), ("k_proj", nk), ("v_proj", nk)):
                out[p + "self_attn.%s.weight" % name] = (rows, H)
                if s.qkv_bias:
                    out[p + "self_attn.%s.bias" % name] = (rows,)
        if s.o_bias:
            out[p + "self_attn.o_proj.bias"] = (H,)
        if s.qk_norm:
            out[p + "self_attn.q_norm.weight"] = (hd,)
            out[p + "self_attn.k_norm.weight"] = (hd,)
        return out

    def _mlp_shapes(self, p, kind, H, I):
        s, c = self.spec, self.config
        if kind == "mixtral":
            out = {p + "block_sparse_moe.gate.weight": (s.experts, H)}
            for e in range(s.experts):
                q = p + "block_sparse_moe.experts.%d." % e
                out.update({q + "w1.weight": (I, H), q + "w2.weight": (H, I), q + "w3.weight": (I, H)})
            return out
        if kind == "qwen2_moe":
            M, S = c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
            out = {p + "mlp.gate.weight": (s.experts, H), p + "mlp.shared_expert_gate.weight": (1, H)}
            for e in range(s.experts):
                out.update(swiglu_shapes(p + "mlp.experts.%d." % e, H, M))
            out.update(swiglu_shapes(p + "mlp.shared_expert.", H, S))
            return out
        if s.fused:
            return {p + "mlp.gate_up_proj.weight": (2 * I, H), p + "mlp.down_proj.weight": (H, I)}
        return swiglu_shapes(p + "mlp.", H, I)

    def _load(self, tensors):
        want = self.expected()
        extra = sorted(set(tensors) - set(want) - ({"lm_head.weight"} if self.spec.tied else set()))
        missing = sorted(set(want) - set(tensors))
        if missing or extra:
            raise KeyError("%s checkpoint: missing tensors %s; unexpected tensors %s"
                           % (self.spec.family, missing[:6] or "none", extra[:6] or "none"))
        w = {}
        for name, shape in want.items():
            t = tensors[name]
            if tuple(t.shape) != tuple(shape):
                raise ValueError("tensor %s has shape %s, expected %s" % (name, list(t.shape), list(shape)))
            w[name] = t.to(F64)
        return w

    # -- forward -----------------------------------------------------------------------------
    def norm(self, x, weight):
        """RMSNorm in float64: Llama-style x̂ * w, Gemma-style x̂ * (1 + w)."""
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.spec.eps)
        return x * (1.0 + weight) if self.spec.gemma else x * weight

    def linear(self, x, name):
        y = x @ self.w[name + ".weight"].t()
        bias = self.w.get(name + ".bias")
        return y if bias is None else y + bias

    def forward(self, ids):
        s = self.spec
        B, T = ids.shape
        x = F.embedding(ids, self.w["model.embed_tokens.weight"])
        if self.embed_scale is not None:
            x = x * self.embed_scale
        tables = {k: r.tables(T) for k, r in s.ropes.items()}
        masks = {W: window_mask(T, W) for W in set(s.windows)}
        for i in range(s.L):
            p = "model.layers.%d." % i
            cos, sin = tables["local" if s.layer_types[i] == "sliding_attention" else "global"]
            h = self.norm(x, self.w[p + "input_layernorm.weight"])
            a = self.attention(p, h, cos, sin, masks[s.windows[i]])
            if s.gemma:
                a = self.norm(a, self.w[p + "post_attention_layernorm.weight"])
            x = x + a
            h = self.norm(x, self.w[p + ("pre_feedforward_layernorm" if s.gemma else "post_attention_layernorm") + ".weight"])
            m = self.mlp(p, s.mlps[i], h.reshape(B * T, s.H)).reshape(B, T, s.H)
            if s.gemma:
                m = self.norm(m, self.w[p + "post_feedforward_layernorm.weight"])
            x = x + m
        x = self.norm(x, self.w["model.norm.weight"])
        head = self.w["model.embed_tokens.weight"] if s.tied else self.w["lm_head.weight"]
        return softcap(x @ head.t(), s.final_cap)

    def attention(self, p, h, cos, sin, allowed):
        s = self.spec
        B, T, _ = h.shape
        nq, nk, hd = s.nh * s.hd, s.nkv * s.hd, s.hd
        if s.fused:
            qkv = self.linear(h, p + "self_attn.qkv_proj")
            q, k, v = qkv[..., :nq], qkv[..., nq:nq + nk], qkv[..., nq + nk:]
        else:
            q, k, v = (self.linear(h, p + "self_attn." + n) for n in ("q_proj", "k_proj", "v_proj"))
        q, k, v = (t.reshape(B, T, -1, hd) for t in (q, k, v))
        if s.qk_norm:  # per head, before the rotary embedding
            q = self.norm(q, self.w[p + "self_attn.q_norm.weight"])
            k = self.norm(k, self.w[p + "self_attn.k_norm.weight"])
        rot = s.ropes["global"].rot_dim
        q = rotate(q.transpose(1, 2), cos, sin, rot)
        k = rotate(k.transpose(1, 2), cos, sin, rot)
        v = v.transpose(1, 2)
        rep = s.nh // s.nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = softcap((q @ k.transpose(2, 3)) * s.scale, s.attn_cap)
        scores = scores.masked_fill(~allowed, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.linear(out.transpose(1, 2).reshape(B, T, nq), p + "self_attn.o_proj")

    def swiglu(self, prefix, h, names=("gate_proj", "up_proj", "down_proj")):
        act = gelu_tanh if self.spec.gemma else F.silu
        gate, up, down = (prefix + n for n in names)
        return self.linear(act(self.linear(h, gate)) * self.linear(h, up), down)

    def mlp(self, p, kind, h):
        s = self.spec
        if kind == "dense" and s.fused:
            gu = self.linear(h, p + "mlp.gate_up_proj")
            gate, up = gu.chunk(2, dim=-1)
            return self.linear(up * F.silu(gate), p + "mlp.down_proj")
        if kind == "dense":
            return self.swiglu(p + "mlp.", h)
        if kind == "mixtral":
            gate = self.w[p + "block_sparse_moe.gate.weight"]
            expert = lambda e, rows: self.swiglu(p + "block_sparse_moe.experts.%d." % e, rows, ("w1", "w3", "w2"))
            return self.experts(h, gate, expert)
        out = self.experts(h, self.w[p + "mlp.gate.weight"], lambda e, rows: self.swiglu(p + "mlp.experts.%d." % e, rows))
        shared = self.swiglu(p + "mlp.shared_expert.", h)
        return out + torch.sigmoid(self.linear(h, p + "mlp.shared_expert_gate")) * shared

    def experts(self, h, gate, expert):
        s = self.spec
        chosen, weights = route(h, gate, s.top_k, s.norm_topk)
        if self.trace is not None:
            self.trace.append((router_probs(h, gate), chosen))
        out = torch.zeros_like(h)
        for e in range(s.experts):
            rows, slot = torch.nonzero(chosen == e, as_tuple=True)
            if rows.numel():
                out.index_add_(0, rows, weights[rows, slot, None] * expert(e, h[rows]))
        return out

    def routing(self, ids):
        """Per MoE layer, the router probabilities [B*T, E] and the chosen experts [B*T, k]: what
        check_families.py reads to show that its checkpoints' routing ties really occur."""
        self.trace = []
        try:
            self.forward(ids)
            return self.trace
        finally:
            self.trace = None


def swiglu_shapes(prefix, H, I):
    return {prefix + "gate_proj.weight": (I, H), prefix + "up_proj.weight": (I, H), prefix + "down_proj.weight": (H, I)}


def uses_family_reference(config):
    """True for the configs this module evaluates: the new families, and Mistral with a window."""
    kind = config.get("model_type")
    if kind == "mistral":
        return config.get("sliding_window") is not None
    return kind in FAMILIES or kind == "gemma3" or config.get("vision_config") is not None
