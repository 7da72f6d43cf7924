#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Prints bench/quant_speed.sh's table (Markdown) and issue 41's goals from the files it left in --work.

Speed is input tokens per second (512 per chunk, as llama.cpp's perplexity tool counts them), per run,
and each row's ratio to the agent's float32 of the same run. Quality comes from the reference runs
(agent: result JSON "reference"; llama.cpp: its --kl-divergence summary).
"""
import argparse
import json
import os
import re
import statistics

AGENT = ["float32", "int8", "int4", "int4-asym", "bfloat16"]
LLAMA = ["f32", "Q8_0", "Q4_0"]


def rss_mb(path):
    return int(open(path).read().split()[-1]) / 1024


def agent_speed(work, name, run):
    j = json.load(open(f"{work}/speed-{name}-{run}.json"))
    return j["windows"] * 512 / j["seconds"], rss_mb(f"{work}/speed-{name}-{run}.json.rss"), j


def llama_speed(work, q, run):
    path = f"{work}/speed-{q}-{run}.log"
    text = open(path).read()
    m = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", text)
    return int(m.group(2)) / (float(m.group(1)) / 1000), rss_mb(path + ".rss")


def llama_quality(work, q):
    text = open(f"{work}/kld-{q}.log").read()

    def grab(label):
        m = re.search(re.escape(label) + r"\s*:?\s*([-\d.]+)", text)
        return float(m.group(1)) if m else None
    ppl = re.search(r"Final estimate: PPL = ([\d.]+)", text) or re.search(r"Mean PPL\(Q\)\s*:\s*([\d.]+)", text)
    return {"ppl": float(ppl.group(1)) if ppl else None, "ratio": grab("Mean PPL(Q)/PPL(base)"),
            "kld": grab("Mean    KLD:"), "p99": grab("99.0%   KLD:"), "top": grab("Same top p:")}


def bits_per_weight(j):
    q = j.get("quantization", {})
    return q.get("bits_per_weight") if q.get("method", "none") != "none" else (16 if j["dtype"] == "bfloat16" else 32)


def fmt_runs(vals, base):
    return " / ".join(f"{v:,.0f} ({v / b:.2f}x)" for v, b in zip(vals, base))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--llama", type=int, default=1)
    a = p.parse_args()
    runs = range(1, a.runs + 1)
    base = [agent_speed(a.work, "float32", r)[0] for r in runs]
    print("| engine, format | bits/weight (linear) | tok/s per run (x our float32 of the run) | PPL | PPL ratio "
          "| KLD mean | KLD p99 | same top | peak RSS MB | weights MB | RSS after load MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    speed = {}
    for name in AGENT:
        rows = [agent_speed(a.work, name, r) for r in runs]
        j = rows[0][2]
        ref = json.load(open(f"{a.work}/ref-{name}.json"))["reference"]
        speed[name] = [x[0] for x in rows]
        print(f"| agent {name} ({j['gemm']}) | {bits_per_weight(j)} | {fmt_runs(speed[name], base)} | {j['ppl']:.4f} "
              f"| {ref['ppl_ratio']:.5f} ± {ref['ppl_ratio_stderr']:.5f} | {ref['kld_mean']:.6f} ± {ref['kld_stderr']:.6f} "
              f"| {ref['kld_p99']:.5f} | {100 * ref['same_top']:.2f}% | {max(x[1] for x in rows):.0f} "
              f"| {j['model']['weight_bytes'] / 2**20:.1f} | {j['model'].get('rss_load_bytes', 0) / 2**20:.1f} |")
    if a.llama:
        for q in LLAMA:
            rows = [llama_speed(a.work, q, r) for r in runs]
            speed["llama.cpp " + q] = [x[0] for x in rows]
            k = llama_quality(a.work, q) if q != "f32" else {"ppl": llama_quality(a.work, q)["ppl"]}
            size = os.path.getsize(f"{a.work}/{q}.gguf") / 2**20
            cell = lambda key, f: f.format(k[key]) if k.get(key) is not None else "-"  # noqa: E731
            print(f"| llama.cpp {q} | | {fmt_runs(speed['llama.cpp ' + q], base)} | {cell('ppl', '{:.4f}')} "
                  f"| {cell('ratio', '{:.5f}')} | {cell('kld', '{:.6f}')} | {cell('p99', '{:.5f}')} "
                  f"| {cell('top', '{:.2f}%')} | {max(x[1] for x in rows):.0f} | {size:.1f} (file) | |")
    print()
    med = {k: statistics.median(v) for k, v in speed.items()}
    ratio = {k: statistics.median([x / b for x, b in zip(v, base)]) for k, v in speed.items()}
    print("median tok/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in med.items()))
    print("median x our float32: " + ", ".join(f"{k} {v:.2f}" for k, v in ratio.items()))
    if a.llama:
        print(f"int4 / llama.cpp Q4_0 (medians): {med['int4'] / med['llama.cpp Q4_0']:.2f}x, "
              f"int4-asym / Q4_0: {med['int4-asym'] / med['llama.cpp Q4_0']:.2f}x")


if __name__ == "__main__":
    main()
