#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seed corpora for the libFuzzer targets (docs/fuzzing.md), built from the repository's real files
(the embedded profile, hostfile, model config and checkpoint header, the GPT-2 tokenizer.json in
../shared/data when present, a tokenizer.model trained by spm_train when installed) plus valid
variants of each format, so that mutations start from the real schemas.

    tests/fuzz/make_seeds.py OUT_DIR      writes OUT_DIR/<target>/seed-*.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def read(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


def telemetry(out):
    head = ('"v":1,"run":"r1","rank":1,"host":"node01","group":0,"local_rank":1,"world_size":4,"seq":7,'
            '"t":1717171717.5,"dropped_total":0')
    xs = "xs1:" + "0" * 112
    kinds = {
        "hello": '"kind":"hello","phase":"loading"',
        "progress": ('"kind":"progress","tokens_scored_total":10,"tokens_per_second":2.5,"windows_done":1,'
                     '"windows_total":2,"compute_seconds_total":1.0,"comm_wait_seconds_total":0.0,'
                     f'"comm_transfer_seconds_total":0.0,"nll_exact":"{xs}","nll_sq_exact":"{xs}","rss_bytes":1'),
        "sync": '"kind":"sync","round":1,"rounds_total":3,"wait_seconds":0.1,"transfer_seconds":0.01',
        "log": '"kind":"log","level":"info","message":"hi \\u00e9"',
        "result": '"kind":"result","result_json":"{\\"ppl\\":1.5}"',
        "error": '"kind":"error","message":"boom","exit_code":4',
        "bye": '"kind":"bye","exit_code":0',
    }
    for name, body in kinds.items():
        write(out, "telemetry_decode", name + ".json", "{" + head + "," + body + "}")


def profile(out):
    base = json.loads(read("resources/profiles/local-default.json"))
    write(out, "profile", "local-default.json", read("resources/profiles/local-default.json"))
    racks = dict(base, name="two racks", launcher="ssh", groups="by-label", hosts=[
        {"name": "node01", "address": "10.0.0.1", "ssh": {"user": "eval", "port": 2222, "identity_file": "~/.ssh/id",
                                                          "password_auth": True},
         "slots": 2, "devices": [1, 0], "agent": "/opt/bin/clusterppl-agent", "workdir": "/scratch", "group": "rackA"},
        {"name": "node02", "ssh": {"alias": "n2"}, "slots": 1, "group": "rackB", "env": {"NCCL_DEBUG": "WARN"}}])
    write(out, "profile", "racks.json", json.dumps(racks))
    explicit = dict(racks, groups=[{"name": "a", "hosts": ["node01"]}, {"name": "b", "hosts": ["node02"]}])
    explicit["evaluation"] = dict(base["evaluation"], tokens="data.u32", protocol="hf-sliding", stride=128,
                                  max_windows=4, dtype="bfloat16", backend="nccl", topology="flat")
    del explicit["evaluation"]["text"]
    explicit["thresholds"] = dict(base["thresholds"], sync_every_tokens=-1, deviation_tolerance=1e-9)
    write(out, "profile", "explicit.json", json.dumps(explicit, indent=1))
    write(out, "profile", "minimal.json", '{"format":"clusterppl-profile","version":1,"hosts":[{"name":"h"}]}')


def hostfile(out):
    racks = read("resources/profiles/two-racks.hostfile")
    for i, f in enumerate(["", "node01:0,1@node03", "node02", "node04:7@node01:3,5", "node01:8"]):
        write(out, "hostfile", f"racks-{i}.txt", f.encode() + b"\n" + racks)
    write(out, "hostfile", "plain.txt", "localhost:0\nlocalhost slots=2\nworker-1 slots=4 # comment\n\n")


def model_config(out):
    real = read("resources/models/shakespeare-byte-llama/config.json")
    write(out, "model_config", "shakespeare-byte-llama.json", real)
    c = json.loads(real)
    variants = {
        "mistral": dict(c, model_type="mistral", sliding_window=4096, use_sliding_window=False),
        "qwen2": dict(c, model_type="qwen2", tie_word_embeddings=True),
        "llama3": dict(c, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
        "gpt2": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12,
                 "n_positions": 1024, "n_inner": None, "layer_norm_epsilon": 1e-5,
                 "activation_function": "gelu_new", "bos_token_id": 50256},
    }
    for name, v in variants.items():
        write(out, "model_config", name + ".json", json.dumps(v))


def safetensors(out):
    # The embedded checkpoint's real header (40 tensors), with shapes shrunk so the seed stays small.
    blob = read("resources/models/shakespeare-byte-llama/model.safetensors")
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    small, offset = {"__metadata__": {"format": "pt"}}, 0
    dtypes = ["F32", "F16", "BF16"]
    for i, (name, info) in enumerate(header.items()):
        if name == "__metadata__" or i >= 12:
            continue
        shape = [2] * len(info["shape"])
        dtype = dtypes[i % 3]
        size = (4 if dtype == "F32" else 2) * (2 ** len(shape))
        small[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(small).encode()
    write(out, "safetensors", "small.safetensors", struct.pack("<Q", len(text)) + text + bytes(i % 256 for i in range(offset)))
    one = json.dumps({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}}).encode()
    write(out, "safetensors", "one.safetensors", struct.pack("<Q", len(one)) + one + bytes(12))
    empty = b'{"e":{"dtype":"F16","shape":[0,4],"data_offsets":[0,0]}}'
    write(out, "safetensors", "empty-tensor.safetensors", struct.pack("<Q", len(empty)) + empty)


def npy(out):
    def file(descr, shape, payload, major=1):
        d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
        pre = 10 if major == 1 else 12
        d += " " * ((64 - (pre + len(d) + 1) % 64) % 64) + "\n"
        length = struct.pack("<H", len(d)) if major == 1 else struct.pack("<I", len(d))
        return b"\x93NUMPY" + bytes([major, 0]) + length + d.encode("latin-1") + payload
    write(out, "npy", "i4.npy", file("<i4", "(5,)", struct.pack("<5i", 1, 2, 3, 4, 5)))
    write(out, "npy", "i8.npy", file("<i8", "(2, 2)", struct.pack("<4q", 7, 0, 255, 65535)))
    write(out, "npy", "u2.npy", file("<u2", "(3,)", struct.pack("<3H", 1, 65535, 0)))
    write(out, "npy", "u4-v2.npy", file("<u4", "(1, 2)", struct.pack("<2I", 50256, 9), major=2))
    write(out, "npy", "i4-v3.npy", file("|i4", "(2,)", struct.pack("<2i", 3, 4), major=3))


def tokenizer_json(out):
    gpt2 = os.path.join(ROOT, "..", "shared", "data", "tokenizers", "gpt2", "tokenizer.json")
    if os.path.exists(gpt2):
        # GPT-2's real file cut to the 256 bytes and its first 200 merges (seeds must be small to mutate).
        t = json.load(open(gpt2, encoding="utf-8"))
        keep = 256 + 200
        t["model"]["vocab"] = {k: v for k, v in t["model"]["vocab"].items() if v < keep}
        t["model"]["merges"] = t["model"]["merges"][:200]
        for a in t["added_tokens"]:
            a["id"] = keep
        write(out, "tokenizer_json", "gpt2-cut.json", json.dumps(t, ensure_ascii=False))
    # SentencePiece-style BPE with byte_fallback (Llama 2's layout), written here from its schema.
    vocab = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    vocab += ["\u2581", "h", "e", "l", "o", "\u2581h", "el", "\u2581hel", "lo", "\u2581hello"]
    merges = ["\u2581 h", "e l", "\u2581h el", "l o", "\u2581hel lo"]
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    spm = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                     {"type": "ByteFallback"}, {"type": "Fuse"},
                                                     {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(vocab)}, "merges": merges},
    }
    write(out, "tokenizer_json", "spm-style.json", json.dumps(spm, ensure_ascii=False))
    spm["normalizer"] = None
    spm["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
    write(out, "tokenizer_json", "metaspace.json", json.dumps(spm, ensure_ascii=False))


def result_json(out):
    def exact(value, rejected=0):
        # docs/exact-sum.md: value on a 2^-64 grid in six radix-2^32 digits (top one signed), then
        # the rejected count; seven little-endian int64 words as hex.
        v = round(value * 2 ** 64)
        words = [(v >> (32 * i)) & 0xFFFFFFFF for i in range(5)] + [v >> 160, rejected]
        return "xs1:" + b"".join(struct.pack("<q", w) for w in words).hex()
    for rank, nll in enumerate((1234.5, 987.25)):
        r = {"ppl": 7.5, "ppl_stderr": 0.1, "nll_sum": nll, "nll_sum_exact": exact(nll),
             "nll_sq_sum_exact": exact(nll * 4.5), "tokens_scored": 600 + rank, "tokens_total": 1300, "windows": 3,
             "bytes": 1300 if rank == 0 else 0, "words": 250 if rank == 0 else 0,
             "protocol": "hf-sliding", "context": 256, "stride": 128, "batch": 8, "max_windows": 0, "dtype": "float32",
             "device": "cpu", "model": {"path": "m", "format": "hf", "arch": "llama", "params": 1000,
                                        "sha256": {"model.safetensors": "ab" * 32}},
             "data": {"path": "d.txt", "format": "bytes", "sha256": "cd" * 32}, "world_size": 1,
             "shard": {"rank": rank, "count": 2, "first_window": 3 * rank, "end_window": 3 * rank + 3},
             "backend": "none", "topology": "none", "version": "0.1.0"}
        write(out, "result_json", f"shard-{rank}-of-2.json", json.dumps(r, indent=2))


def spm_model(out):
    def varint(n):
        b = bytearray()
        while True:
            b.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(b)

    def field(num, payload):
        if isinstance(payload, int):
            return varint(num << 3) + varint(payload)
        return varint(num << 3 | 2) + varint(len(payload)) + payload

    pieces = b"".join(field(1, field(1, p.encode()) + b"\x15\x00\x00\x80\xbf" + field(3, t))
                      for p, t in [("<unk>", 2), ("<s>", 3), ("</s>", 3), ("<0x41>", 6), ("\u2581the", 1)])
    trainer = field(2, field(3, 2) + field(35, 1))
    normalizer = field(3, field(1, b"identity") + field(3, 1) + field(4, 0))
    write(out, "spm_model", "handmade.model", pieces + trainer + normalizer)
    text = os.path.join(ROOT, "resources", "data", "tinyshakespeare-heldout.txt")
    if shutil.which("spm_train") and os.path.exists(text):
        with tempfile.TemporaryDirectory() as tmp:
            sample = os.path.join(tmp, "sample.txt")
            with open(text, encoding="utf-8") as src, open(sample, "w", encoding="utf-8") as dst:
                dst.write(src.read()[:20000])
            for kind in ("bpe", "unigram"):
                prefix = os.path.join(tmp, kind)
                subprocess.run(["spm_train", f"--input={sample}", f"--model_prefix={prefix}", "--vocab_size=400",
                                "--normalization_rule_name=identity",
                                f"--model_type={kind}", "--byte_fallback=true", "--minloglevel=2"],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(prefix + ".model", "rb") as f:
                    write(out, "spm_model", f"spm-train-{kind}.model", f.read())


def rendezvous_server(out):
    """One client's requests to the rendezvous store, in c10d 1.x's and 2.x's wire protocols
    (agent/lib/distributed/rendezvous_server.h): every request kind, a wait left pending at the EOF."""
    def s(b):
        b = b if isinstance(b, bytes) else b.encode()
        return struct.pack("<Q", len(b)) + b

    def keys(*ks):
        return struct.pack("<Q", len(ks)) + b"".join(s(k) for k in ks)

    def q(op):
        return bytes([op])

    v1 = {"set": 0, "compare_set": 1, "get": 2, "add": 3, "check": 4, "wait": 5, "num_keys": 6, "watch": 7, "delete": 8}
    one = (q(v1["set"]) + s("rank/0") + s("10.0.0.1:29500") + q(v1["get"]) + s("rank/0")
           + q(v1["add"]) + s("cppl/counter") + struct.pack("<q", 5) + q(v1["add"]) + s("cppl/counter") + struct.pack("<q", -2)
           + q(v1["check"]) + keys("rank/0", "rank/1") + q(v1["wait"]) + keys("rank/0")
           + q(v1["compare_set"]) + s("cppl/epoch") + s("") + s("1") + q(v1["num_keys"])
           + q(v1["delete"]) + s("rank/0") + q(v1["wait"]) + keys("never/set"))
    write(out, "rendezvous_server", "c10d-1x.bin", one)
    write(out, "rendezvous_server", "c10d-1x-watch.bin", q(v1["set"]) + s("k") + s("v") + q(v1["watch"]) + s("k"))
    v2 = {"validate": 0, "set": 1, "compare_set": 2, "get": 3, "add": 4, "check": 5, "wait": 6, "num_keys": 7,
          "delete": 8, "append": 9, "multi_get": 10, "multi_set": 11, "cancel_wait": 12, "ping": 13}
    two = (q(v2["validate"]) + struct.pack("<I", 0x3C85F7CE) + q(v2["ping"]) + struct.pack("<I", 0xC0FFEE)
           + q(v2["set"]) + s("rank/1") + s("host1") + q(v2["wait"]) + keys("rank/1") + q(v2["get"]) + s("rank/1")
           + q(v2["append"]) + s("log") + s("a") + q(v2["append"]) + s("log") + s("b")
           + q(v2["multi_set"]) + struct.pack("<Q", 2) + s("x") + s("1") + s("y") + s("2")
           + q(v2["multi_get"]) + keys("x", "y", "log") + q(v2["add"]) + s("n") + struct.pack("<q", 1)
           + q(v2["compare_set"]) + s("x") + s("1") + s("3") + q(v2["check"]) + keys("x", "z")
           + q(v2["wait"]) + keys("z") + q(v2["cancel_wait"]) + q(v2["num_keys"]) + q(v2["delete"]) + s("x"))
    write(out, "rendezvous_server", "c10d-2x.bin", two)
    write(out, "rendezvous_server", "c10d-2x-bad-magic.bin", q(v2["validate"]) + struct.pack("<I", 7) + q(v2["ping"]) + struct.pack("<I", 1))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py OUT_DIR")
    out = sys.argv[1]
    for make in (telemetry, profile, hostfile, result_json, model_config, safetensors, npy, tokenizer_json,
                 spm_model, rendezvous_server):
        make(out)


if __name__ == "__main__":
    main()
