#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes GPTQ or AWQ quantized layers as their checkpoints store them, and their float64 dequantized weights.

The layouts, from the formats' published packing (AutoGPTQ / GPTQModel / transformers' GPTQ, AutoAWQ's
WQLinear_GEMM), written here independently of the C++ reader (agent/lib/quant/gptq_awq.h):

GPTQ (bits 4 or 8, pack = 32 / bits values per int32, value t of a word at bits t * bits):
  qweight I32 [in / pack, out]: word [r][j] holds input features r * pack .. r * pack + pack - 1 of output j;
  qzeros  I32 [groups, out / pack]: word [g][c] holds the zero points of outputs c * pack .. c * pack + pack - 1;
  scales  F16 [groups, out]; g_idx I32 [in] (the group of each input feature);
  weight = scale * (q - zero), zero = stored + 1 for checkpoint format "gptq" (v1), stored for "gptq_v2".
  --desc-act: g_idx[perm[p]] = p // group for a random permutation perm (AutoGPTQ's act-order); with
  --uneven-groups the input features get random groups instead (not group_size each).
AWQ (bits 4): qweight I32 [in, out / 8], qzeros I32 [in / group, out / 8]: word [i][c] holds outputs
  c * 8 + ORDER[t] at bits 4 t, ORDER = (0, 2, 4, 6, 1, 3, 5, 7); scales F16 [in / group, out];
  weight = scale * (q - zero).

Writes DIR/config.json (quantization_config), DIR/model.safetensors and, per layer, DIR/reference/NAME.f64:
the dequantized weight [out][in] as little-endian float64, computed from the integers before packing
(and NAME.bias.f64 with --bias).
--break KIND damages the first layer (missing-scales, qweight-shape, qzeros-packed, scales-dtype,
gidx-range, qweight-dtype) for the refusal tests. Prints a JSON summary. Run with /usr/bin/python3.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
# NumPy only, without ref_common (which imports torch): a test writes a dozen of these directories,
# and importing torch takes seconds each time.
SAFETENSORS_DTYPES = {np.dtype("<i4"): "I32", np.dtype("<i8"): "I64", np.dtype("<f2"): "F16", np.dtype("<f4"): "F32"}
BREAKS = ("missing-scales", "qweight-shape", "qzeros-packed", "scales-dtype", "gidx-range", "qweight-dtype")


class UsageError(Exception):
    """Bad input: 'error: ...' and exit status 2, as the other reference tools (ref_common.run_main)."""


def run_main(main):
    try:
        status = main()
    except (UsageError, OSError, ValueError, KeyError) as e:
        sys.stderr.write("error: %s\n" % e)
        sys.exit(2)
    sys.exit(status or 0)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--method", required=True, choices=["gptq", "awq"])
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--group", type=int, default=64, help="group_size (-1: one group per row)")
    p.add_argument("--format", default="gptq", choices=["gptq", "gptq_v2"], help="GPTQ checkpoint format")
    p.add_argument("--sym", action="store_true", help="GPTQ: every zero point 2^(bits-1)")
    p.add_argument("--desc-act", action="store_true")
    p.add_argument("--uneven-groups", action="store_true")
    p.add_argument("--bias", action="store_true", help="also a float16 bias per layer")
    p.add_argument("--layers", default="model.layers.0.self_attn.q_proj:96:128,model.layers.0.mlp.down_proj:40:160",
                   help="NAME:OUT:IN,...")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--break", dest="damage", choices=BREAKS)
    p.add_argument("--config-extra", default="{}", help="JSON merged into quantization_config (refusal tests)")
    return p.parse_args(argv)


def pack_words(values, bits, axis_order):
    """values [..., n * pack] (uint) -> uint32 words [..., n]; value axis_order[t] of each word at bits t * bits."""
    pack = 32 // bits
    v = values.astype(np.uint64).reshape(values.shape[:-1] + (-1, pack))
    words = np.zeros(v.shape[:-1], dtype=np.uint64)
    for t in range(pack):
        words |= v[..., axis_order[t]] << np.uint64(bits * t)
    return words.astype(np.uint32).view(np.int32)


def make_layer(rng, args, out, inp):
    bits = args.bits
    group = inp if args.group == -1 else args.group
    groups = (inp + group - 1) // group
    q = rng.integers(0, 2 ** bits, size=(inp, out))
    if args.method == "gptq" and args.sym:
        stored = np.full((groups, out), 2 ** (bits - 1) - (0 if args.format == "gptq_v2" else 1))
    else:
        stored = rng.integers(0, 2 ** bits, size=(groups, out))
    zero = stored + (1 if args.method == "gptq" and args.format == "gptq" else 0)
    scales = rng.normal(0.0, 0.02, size=(groups, out)).astype(np.float16)  # round to nearest even
    if args.method == "gptq" and args.uneven_groups:
        g_idx = rng.integers(0, groups, size=inp)
    elif args.method == "gptq" and args.desc_act:
        perm = rng.permutation(inp)
        g_idx = np.empty(inp, dtype=np.int64)
        g_idx[perm] = np.arange(inp) // group
    else:
        g_idx = np.arange(inp) // group
    s64 = scales.astype(np.float64)
    w = s64[g_idx, :] * (q - zero[g_idx, :]).astype(np.float64)  # [in, out]
    if args.method == "gptq":
        pack = 32 // bits
        tensors = {"qweight": pack_words(q.T, bits, range(pack)).T.copy(),
                   "qzeros": pack_words(stored, bits, range(pack)),
                   "scales": scales,
                   "g_idx": g_idx.astype(np.int32)}
    else:
        tensors = {"qweight": pack_words(q, 4, AWQ_ORDER),
                   "qzeros": pack_words(stored, 4, AWQ_ORDER),
                   "scales": scales}
    if args.bias:
        tensors["bias"] = rng.normal(0.0, 0.1, size=out).astype(np.float16)
    return tensors, w.T.copy()


def damage(tensors, kind, groups_hint):
    if kind == "missing-scales":
        del tensors["scales"]
    elif kind == "qweight-shape":
        tensors["qweight"] = tensors["qweight"][:-1].copy()
    elif kind == "qzeros-packed":
        z = tensors["qzeros"]
        tensors["qzeros"] = np.concatenate([z, z[:, :1]], axis=1)
    elif kind == "scales-dtype":
        tensors["scales"] = tensors["scales"].astype(np.float32)
    elif kind == "qweight-dtype":
        tensors["qweight"] = tensors["qweight"].astype(np.int64)
    elif kind == "gidx-range":
        if "g_idx" not in tensors:
            raise UsageError("--break gidx-range needs a GPTQ layer")
        tensors["g_idx"][0] = groups_hint


def save_safetensors(path, tensors):
    """u64 little-endian header length, JSON header {name: {dtype, shape, data_offsets}}, the raw bytes."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = np.ascontiguousarray(tensors[name])
        t = t.astype(t.dtype.newbyteorder("<"))
        raw = t.tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    args = parse_args()
    if args.method == "awq" and args.bits != 4:
        raise UsageError("AWQ layers are 4-bit")
    rng = np.random.default_rng(args.seed)
    os.makedirs(os.path.join(args.out, "reference"), exist_ok=True)
    all_tensors, layers = {}, []
    for i, spec in enumerate(args.layers.split(",")):
        name, out, inp = spec.split(":")
        out, inp = int(out), int(inp)
        tensors, w = make_layer(rng, args, out, inp)
        if i == 0 and args.damage:
            damage(tensors, args.damage, (inp + (inp if args.group == -1 else args.group) - 1) // (inp if args.group == -1 else args.group))
        for suffix, t in tensors.items():
            all_tensors[name + "." + suffix] = t
        w.astype("<f8").tofile(os.path.join(args.out, "reference", name + ".f64"))
        if "bias" in tensors:
            tensors["bias"].astype("<f8").tofile(os.path.join(args.out, "reference", name + ".bias.f64"))
        layers.append({"name": name, "out": out, "in": inp})
    save_safetensors(os.path.join(args.out, "model.safetensors"), all_tensors)
    q = {"quant_method": args.method, "bits": args.bits, "group_size": args.group}
    if args.method == "gptq":
        q.update({"desc_act": args.desc_act, "sym": args.sym, "checkpoint_format": args.format})
    else:
        q.update({"version": "gemm", "zero_point": True})
    q.update(json.loads(args.config_extra))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "quantization_config": q}, f, indent=1)
    print(json.dumps({"directory": args.out, "layers": layers, "quantization_config": q}))
    return 0


if __name__ == "__main__":
    run_main(main)
