#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Per-family speed (issue 42), side by side in one run: `clusterppl-agent eval` on a random ~95M
# checkpoint of each family given (make_checkpoint.py), all at Llama's shape (hidden 1024, 8 layers,
# 16 query / 8 K/V heads of 64, intermediate 2816, vocabulary 512: issue 41's 95M Llama, the
# yardstick), the mixtures of experts at the same ACTIVE parameter count (top-2 of 8 experts of
# 1408, qwen2_moe top-2 of 8 of 704 plus a shared expert of 1408); float32 on the agent's kernels,
# 2 threads, hf-sliding with context 512 and stride 512, WINDOWS windows in batches of 4. RUNS
# repeats, interleaved (run 1 of every family, then run 2, ...), so a change in the host's load
# touches every family alike. Per family: the median tokens/s, and that per parameter (per active
# parameter for the mixtures) against Llama's, the issue's goal being within 15% (>= 0.85).
#
#   bench/family_speed.sh [BUILD_DIR] [WINDOWS] [RUNS] [FAMILY...]
# Families: the keys of FAMILIES below (default: all of them, llama first). A family is one line there.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_setup "${1:-}"
WINDOWS="${2:-8}"
RUNS="${3:-3}"
shift $(($# < 3 ? $# : 3))
SHAPE=(--vocab 512 --hidden 1024 --layers 8 --heads 16 --max-positions 1024)
GQA=(--kv-heads 8)
declare -A FAMILIES=(
  [llama]="--arch llama ${GQA[*]} --intermediate 2816"
  [mistral]="--arch mistral ${GQA[*]} --intermediate 2816 --sliding-window 256"
  [qwen2]="--arch qwen2 ${GQA[*]} --intermediate 2816"
  [qwen3]="--arch qwen3 ${GQA[*]} --intermediate 2816 --head-dim 64"
  [gemma2]="--arch gemma2 ${GQA[*]} --intermediate 2816 --head-dim 64 --query-pre-attn-scalar 64 --sliding-window 256"
  [gemma3]="--arch gemma3 ${GQA[*]} --intermediate 2816 --head-dim 64 --query-pre-attn-scalar 64 --sliding-window 256"
  [phi3]="--arch phi3 ${GQA[*]} --intermediate 2816"
  [mixtral]="--arch mixtral ${GQA[*]} --intermediate 1408 --experts 8 --top-k 2 --no-router-tie"
  [qwen2_moe]="--arch qwen2_moe ${GQA[*]} --intermediate 2816 --experts 8 --top-k 2 --moe-intermediate 704 --shared-intermediate 1408 --no-router-tie"
  [gpt2]="--arch gpt2"
)
ORDER=(llama mistral qwen2 qwen3 gemma2 gemma3 phi3 mixtral qwen2_moe gpt2)
LIST=("$@")
[[ ${#LIST[@]} -gt 0 ]] || LIST=("${ORDER[@]}")
[[ " ${LIST[*]} " == *" llama "* ]] || LIST=(llama "${LIST[@]}") # the yardstick
for f in "${LIST[@]}"; do
  [[ -n "${FAMILIES[$f]:-}" ]] || { echo "error: unknown family \"$f\" (known: ${!FAMILIES[*]})" >&2; exit 2; }
done

bench_tokens "$WORK/family-tokens.u32" 200000 512
for f in "${LIST[@]}"; do
  # shellcheck disable=SC2086 # the family's flags are words
  bench_checkpoint "$WORK/family-$f" ${FAMILIES[$f]} "${SHAPE[@]}"
done
echo "family_speed: $WINDOWS windows of 512 (hf-sliding, stride 512), batch 4, float32, 2 threads, runs=$RUNS; $(bench_cpu); $(bench_load)"
for run in $(seq 1 "$RUNS"); do
  for f in "${LIST[@]}"; do
    "$AGENT" eval --model "$WORK/family-$f" --tokens "$WORK/family-tokens.u32" --protocol hf-sliding --context 512 --stride 512 \
        --batch 4 --max-windows "$WINDOWS" --threads 2 --dtype float32 --gemm native --quiet --json "$WORK/family-$f-$run.json" >/dev/null
  done
  echo "run $run done; $(bench_load)"
done
"$PY" - "$WORK" "$RUNS" "${LIST[@]}" <<'PY'
import json, statistics, sys
work, runs, families = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def active(cfg, params):
    """Parameters one token multiplies by: all of them, less the experts a token does not visit."""
    t = cfg["model_type"]
    if t == "mixtral":
        per = 3 * cfg["hidden_size"] * cfg["intermediate_size"]
        return params - cfg["num_hidden_layers"] * (cfg["num_local_experts"] - cfg["num_experts_per_tok"]) * per
    if t == "qwen2_moe":
        per = 3 * cfg["hidden_size"] * cfg["moe_intermediate_size"]
        return params - cfg["num_hidden_layers"] * (cfg["num_experts"] - cfg["num_experts_per_tok"]) * per
    return params

rows = {}
for f in families:
    js = [json.load(open("%s/family-%s-%d.json" % (work, f, r))) for r in range(1, runs + 1)]
    cfg = json.load(open("%s/family-%s/config.json" % (work, f)))
    params = js[0]["model"]["params"]
    rows[f] = (statistics.median(j["tokens_per_second"] for j in js), [j["tokens_per_second"] for j in js], params, active(cfg, params), js[0]["gemm"])
base_tok, _, base_params, _, _ = rows["llama"]
print("%-10s %12s %12s %26s %10s %13s  %s" % ("family", "params", "active", "tok/s (runs)", "median", "x llama/param", "gemm"))
for f in families:
    tok, each, params, act, gemm = rows[f]
    ratio = tok * act / (base_tok * base_params)
    print("%-10s %12d %12d %26s %10.1f %13.3f  %s%s" % (f, params, act, " / ".join("%.0f" % t for t in each), tok, ratio, gemm,
                                                        "" if ratio >= 0.85 else "  (below 0.85)"))
PY
