# SPDX-License-Identifier: MIT
"""config.json and tensors of tiny random checkpoints of the issue-42 families, for make_checkpoint.py.

Each config carries the fields its family's published checkpoints carry (Qwen3-0.6B, gemma-2-2b,
gemma-3-1b-pt, Phi-3-mini-4k-instruct / -128k-instruct, Mistral-7B-v0.1, Mixtral-8x7B-v0.1,
Qwen1.5-MoE-A2.7B), with small shapes; token ids the tiny vocabulary does not have are clamped
into it. Tensor names and shapes are the checkpoints' own (model.layers.N.self_attn.q_norm.weight,
model.layers.N.mlp.gate_up_proj.weight, model.layers.N.block_sparse_moe.experts.E.w1.weight,
model.layers.N.mlp.shared_expert_gate.weight, ...), in transformers' state-dict order.

Values are chosen so that every feature shows in the logits (see make_checkpoint.py --help and the
README): norms far from 1, soft-caps the logits reach, a sliding window shorter than the contexts
the tests use, routers in which two experts tie exactly.
"""

# Per family: the architecture name, the published checkpoint the fields come from, and the
# defaults for flags left out (None = the flag's own default).
FAMILY = {
    "qwen3": {"arch": "Qwen3ForCausalLM", "kv_heads": 2, "head_dim": 16, "theta": 1000000.0, "eps": 1e-6,
              "version": "4.51.0"},
    "gemma2": {"arch": "Gemma2ForCausalLM", "kv_heads": 2, "head_dim": 16, "theta": 10000.0, "eps": 1e-6,
               "layers": 3, "window": 4, "qpas": 24.0, "attn_cap": 1.5, "final_cap": 3.0, "version": "4.42.4"},
    "gemma3": {"arch": "Gemma3ForCausalLM", "kv_heads": 1, "head_dim": 16, "theta": 1000000.0, "eps": 1e-6,
               "layers": 4, "window": 4, "qpas": 24.0, "pattern": 3, "local_theta": 10000.0,
               "rope_scaling": "linear", "version": "4.50.0.dev0"},
    "phi3": {"arch": "Phi3ForCausalLM", "kv_heads": None, "theta": 10000.0, "eps": 1e-5, "version": "4.40.2"},
    "mistral": {"arch": "MistralForCausalLM", "kv_heads": 2, "theta": 10000.0, "eps": 1e-5, "window": 6,
                "version": "4.34.0.dev0"},
    "mixtral": {"arch": "MixtralForCausalLM", "kv_heads": 2, "theta": 1000000.0, "eps": 1e-5, "experts": 4,
                "top_k": 2, "intermediate": 24, "version": "4.36.0.dev0"},
    "qwen2_moe": {"arch": "Qwen2MoeForCausalLM", "kv_heads": None, "theta": 1000000.0, "eps": 1e-6, "experts": 4,
                  "top_k": 2, "moe_intermediate": 24, "shared_intermediate": 40, "version": "4.40.0.dev0"},
}
MODEL_TYPE = {"gemma3": "gemma3_text"}


def token_id(real, vocab):
    return real if real < vocab else vocab - 1


def base_config(a, fam):
    """The fields every one of these families' configs has."""
    d = FAMILY[fam]
    return {
        "architectures": [d["arch"]],
        "model_type": MODEL_TYPE.get(fam, fam),
        "vocab_size": a.vocab,
        "hidden_size": a.hidden,
        "intermediate_size": a.intermediate,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "max_position_embeddings": a.max_positions,
        "rms_norm_eps": a.norm_eps,
        "rope_theta": a.rope_theta,
        "initializer_range": 0.02,
        "torch_dtype": a.torch_dtype,
        "transformers_version": d["version"],
        "use_cache": True,
    }


def qwen3_config(a, c):
    c.update({"head_dim": a.head_dim, "hidden_act": "silu", "attention_bias": bool(a.attention_bias),
              "attention_dropout": 0.0, "bos_token_id": token_id(151643, a.vocab), "eos_token_id": token_id(151645, a.vocab),
              "max_window_layers": a.layers, "rope_scaling": None, "sliding_window": None,
              "use_sliding_window": False, "tie_word_embeddings": bool(a.tied)})


def gemma_config(a, c, fam):
    c.update({"head_dim": a.head_dim, "hidden_activation": "gelu_pytorch_tanh", "attention_bias": bool(a.attention_bias),
              "attention_dropout": 0.0, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2,
              "cache_implementation": "hybrid", "query_pre_attn_scalar": a.query_pre_attn_scalar,
              "sliding_window": a.sliding_window, "attn_logit_softcapping": a.attn_softcap,
              "final_logit_softcapping": a.final_softcap})
    if fam == "gemma2":
        c["hidden_act"] = "gelu_pytorch_tanh"  # gemma-2-2b carries both names
        return
    c["eos_token_id"] = [1, token_id(106, a.vocab)]
    c.update({"rope_local_base_freq": a.rope_local_theta, "sliding_window_pattern": a.sliding_window_pattern,
              "rope_scaling": {"factor": a.rope_factor, "rope_type": "linear"} if a.rope_scaling == "linear" else None})


def phi3_config(a, c):
    head = a.hidden // a.heads
    rot = int(head * a.partial_rotary) if a.partial_rotary is not None else head
    c.update({"architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
              "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config",
                           "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"},
              "bos_token_id": 1, "eos_token_id": token_id(32000, a.vocab), "pad_token_id": token_id(32000, a.vocab),
              "embd_pdrop": 0.0, "resid_pdrop": 0.0, "hidden_act": "silu", "rope_scaling": None,
              "original_max_position_embeddings": a.max_positions, "sliding_window": a.sliding_window,
              "tie_word_embeddings": bool(a.tied)})
    if a.partial_rotary is not None:
        c["partial_rotary_factor"] = a.partial_rotary
    if a.rope_scaling in ("longrope", "su"):
        # Phi-3-mini-128k: 4096 -> 131072, factors per rotary pair; here original = --rope-original-max.
        c["original_max_position_embeddings"] = a.rope_original_max
        n = rot // 2
        c["rope_scaling"] = {"long_factor": [round(1.0 + 1.5 * j + 0.25 * (j % 3), 4) for j in range(n)],
                             "short_factor": [round(1.0 + 0.1 * j, 4) for j in range(n)], "type": a.rope_scaling}


def llama_like_config(a, c, fam):
    c.update({"hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": bool(a.tied),
              "sliding_window": a.sliding_window})
    if a.head_dim_given:
        c["head_dim"] = a.head_dim
    if fam == "mixtral":
        c.update({"attention_dropout": 0.0, "num_local_experts": a.experts, "num_experts_per_tok": a.top_k,
                  "output_router_logits": False, "router_aux_loss_coef": 0.02})


def qwen2_moe_config(a, c):
    c.update({"hidden_act": "silu", "attention_dropout": 0.0, "bos_token_id": token_id(151643, a.vocab),
              "eos_token_id": token_id(151643, a.vocab), "max_window_layers": a.layers,
              "sliding_window": a.max_positions, "use_sliding_window": False, "tie_word_embeddings": bool(a.tied),
              "decoder_sparse_step": a.decoder_sparse_step, "moe_intermediate_size": a.moe_intermediate,
              "shared_expert_intermediate_size": a.shared_intermediate, "num_experts_per_tok": a.top_k,
              "num_experts": a.experts, "norm_topk_prob": bool(a.norm_topk_prob), "output_router_logits": False,
              "router_aux_loss_coef": 0.001})
    if a.mlp_only_layers:
        c["mlp_only_layers"] = a.mlp_only_layers


def family_config(a, fam):
    c = base_config(a, fam)
    if fam == "qwen3":
        qwen3_config(a, c)
    elif fam in ("gemma2", "gemma3"):
        gemma_config(a, c, fam)
    elif fam == "phi3":
        phi3_config(a, c)
    elif fam == "qwen2_moe":
        qwen2_moe_config(a, c)
    else:
        llama_like_config(a, c, fam)
    return dict(sorted(c.items()))  # as save_pretrained writes it


# ----------------------------------------------------------------------------------------------
# Tensors, in transformers' state-dict order
# ----------------------------------------------------------------------------------------------
def attention_tensors(c, init, p, fam):
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or H // nh
    bias = fam == "qwen2_moe" or c.get("attention_bias", False)
    t = {}
    if fam == "phi3":
        t[p + "self_attn.o_proj.weight"] = init.weight((H, nh * hd), nh * hd)
        t[p + "self_attn.qkv_proj.weight"] = init.weight(((nh + 2 * nkv) * hd, H), H)
        return t
    for name, rows in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd)):
        t[p + "self_attn.%s.weight" % name] = init.weight((rows, H), H)
        if bias:
            t[p + "self_attn.%s.bias" % name] = init.bias(rows)
    t[p + "self_attn.o_proj.weight"] = init.weight((H, nh * hd), nh * hd)
    if bias and fam != "qwen2_moe":
        t[p + "self_attn.o_proj.bias"] = init.bias(H)
    if fam in ("qwen3", "gemma3"):
        t[p + "self_attn.q_norm.weight"] = init.wide_norm(hd, fam)
        t[p + "self_attn.k_norm.weight"] = init.wide_norm(hd, fam)
    return t


def swiglu(init, p, H, I):
    return {p + "gate_proj.weight": init.weight((I, H), H), p + "up_proj.weight": init.weight((I, H), H),
            p + "down_proj.weight": init.weight((H, I), I)}


def router(init, E, H, tie):
    """[E, H]; with tie, expert 2's row is expert 1's, so those two always tie exactly."""
    g = init.weight((E, H), H) * 2.0
    if tie and E >= 3:
        g[2] = g[1]
    return g


def mlp_tensors(c, init, p, fam, i, tie):
    H, I = c["hidden_size"], c["intermediate_size"]
    if fam == "phi3":
        return {p + "mlp.gate_up_proj.weight": init.weight((2 * I, H), H), p + "mlp.down_proj.weight": init.weight((H, I), I)}
    if fam == "mixtral":
        E = c["num_local_experts"]
        t = {p + "block_sparse_moe.gate.weight": router(init, E, H, tie)}
        for e in range(E):
            q = p + "block_sparse_moe.experts.%d." % e
            t.update({q + "w1.weight": init.weight((I, H), H), q + "w2.weight": init.weight((H, I), I),
                      q + "w3.weight": init.weight((I, H), H)})
        return t
    if fam == "qwen2_moe" and qwen2_moe_sparse(c, i):
        E, M, S = c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
        t = {p + "mlp.gate.weight": router(init, E, H, tie)}
        for e in range(E):
            t.update(swiglu(init, p + "mlp.experts.%d." % e, H, M))
        t.update(swiglu(init, p + "mlp.shared_expert.", H, S))
        t[p + "mlp.shared_expert_gate.weight"] = init.weight((1, H), H) * 3.0
        return t
    return swiglu(init, p + "mlp.", H, I)


def qwen2_moe_sparse(c, i):
    return (i not in (c.get("mlp_only_layers") or [])) and c["num_experts"] > 0 and (i + 1) % c["decoder_sparse_step"] == 0


def family_tensors(c, init, fam, tie_router):
    """The checkpoint's tensors. Gemma norms store w of (1 + w); all norms are far from 1."""
    H, V = c["hidden_size"], c["vocab_size"]
    gemma = fam in ("gemma2", "gemma3")
    t = {"model.embed_tokens.weight": init.normal((V, H), 0.5 * (32.0 / H) ** 0.5 * (0.2 if gemma else 1.0))}
    norms = ["input_layernorm", "post_attention_layernorm"]
    if gemma:
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        t.update(attention_tensors(c, init, p, fam))
        t.update(mlp_tensors(c, init, p, fam, i, tie_router and i == 0))
        for n in norms:
            t[p + n + ".weight"] = init.wide_norm(H, fam)
    t["model.norm.weight"] = init.wide_norm(H, fam)
    if not c.get("tie_word_embeddings", gemma):
        t["lm_head.weight"] = init.weight((V, H), H)
    return t
