#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 41's "Figures to beat", side by side in one run: clusterppl-agent eval on the issue's random
# 95M Llama at float32, int8, int4 (symmetric and asymmetric), bfloat16, and llama.cpp's perplexity
# tool on the same weights at f32, Q8_0 and Q4_0; context 512, llama.cpp's protocol, THREADS threads,
# a 16,384-token byte-level text (WikiText-2 test's first printable ASCII bytes).
#
#   bench/quant_speed.sh [BUILD_DIR] [LLAMA_CPP_DIR] [RUNS] [THREADS]
#
# Each run times every row (input tokens per second, as llama.cpp counts them: 512 per chunk; peak
# RSS from /usr/bin/time). Quality once, as it does not change between runs: the agent with
# --reference-model on the float32 checkpoint (KLD, same top token, PPL ratio), llama.cpp with
# --kl-divergence-base (f32) and --kl-divergence (Q8_0, Q4_0). Without LLAMA_CPP_DIR's
# build/bin/llama-perplexity and llama-quantize, or its gguf-py, the llama.cpp rows are skipped.
# The model, GGUFs and text are made once in BUILD_DIR/bench-work/q95 (bench/python/quant_model.py).
# docs/speed.md, "Issue 41's 95M Llama", has the figures and how they were taken.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build/default}"
LLAMA="${2:-/work/llama.cpp}"
RUNS="${3:-2}"
THREADS="${4:-2}"
PY=/usr/bin/python3
W="$BUILD/bench-work/q95"
AGENT="$BUILD/agent/clusterppl-agent"
MODEL="$W/llama-95m"
mkdir -p "$W"

[[ -f "$MODEL/model.safetensors" ]] || "$PY" "$ROOT/bench/python/quant_model.py" checkpoint --out "$MODEL" >/dev/null
[[ -f "$W/wiki16k.txt" ]] || "$PY" "$ROOT/bench/python/quant_model.py" text \
    --source "$ROOT/../shared/data/wikitext-2-raw/wiki.test.raw" --tokens 16384 --out "$W/wiki16k" >/dev/null

HAVE_LLAMA=1
for f in build/bin/llama-perplexity build/bin/llama-quantize gguf-py/gguf/__init__.py; do
  [[ -e "$LLAMA/$f" ]] || { echo "llama.cpp rows skipped: no $LLAMA/$f"; HAVE_LLAMA=0; }
done
if (( HAVE_LLAMA )); then
  [[ -f "$W/f32.gguf" ]] || "$PY" "$ROOT/bench/python/quant_model.py" gguf --model "$MODEL" --gguf-py "$LLAMA/gguf-py" \
      --out "$W/f32.gguf" >/dev/null
  for q in Q8_0 Q4_0; do
    [[ -f "$W/$q.gguf" ]] || "$LLAMA/build/bin/llama-quantize" "$W/f32.gguf" "$W/$q.gguf" "$q" "$THREADS" >"$W/quantize-$q.log" 2>&1
  done
fi

# name -> agent options
declare -A AGENT_ROWS=([float32]="" [int8]="--quantize int8" [int4]="--quantize int4" [int4-asym]="--quantize int4-asym"
                       [bfloat16]="--dtype bfloat16")
ORDER="float32 int8 int4 int4-asym bfloat16"
agent() {  # NAME OUT.json [extra options]
  local name=$1 out=$2; shift 2
  /usr/bin/time -f "%M" -o "$out.rss" "$AGENT" eval --model "$MODEL" --text "$W/wiki16k.txt" --tokenizer bytes \
      --protocol llama.cpp --context 512 --batch 8 --threads "$THREADS" ${AGENT_ROWS[$name]} "$@" --quiet --json "$out" >/dev/null
}
llamacpp() {  # TYPE LOG [extra options]
  local q=$1 log=$2; shift 2
  /usr/bin/time -f "%M" -o "$log.rss" "$LLAMA/build/bin/llama-perplexity" -m "$W/$q.gguf" -f "$W/wiki16k.txt" -c 512 \
      -t "$THREADS" -tb "$THREADS" "$@" >"$log" 2>&1
}

echo "quality (once): $(uptime | sed 's/.*load/load/')"
for name in $ORDER; do agent "$name" "$W/ref-$name.json" --reference-model "$MODEL" --reference-dtype float32; done
if (( HAVE_LLAMA )); then
  llamacpp f32 "$W/kld-f32.log" --kl-divergence-base "$W/f32.kld"
  for q in Q8_0 Q4_0; do llamacpp "$q" "$W/kld-$q.log" --kl-divergence-base "$W/f32.kld" --kl-divergence; done
fi
: >"$W/speed.rows"
for run in $(seq 1 "$RUNS"); do
  echo "run $run: $(uptime | sed 's/.*load/load/')"
  for name in $ORDER; do
    agent "$name" "$W/speed-$name.json"
    echo "agent $name $run $W/speed-$name.json" >>"$W/speed.rows"
    cp "$W/speed-$name.json" "$W/speed-$name-$run.json"; cp "$W/speed-$name.json.rss" "$W/speed-$name-$run.json.rss"
  done
  if (( HAVE_LLAMA )); then
    for q in f32 Q8_0 Q4_0; do llamacpp "$q" "$W/speed-$q-$run.log"; done
  fi
  echo "       $(uptime | sed 's/.*load/load/')"
done
"$PY" "$ROOT/bench/python/quant_table.py" --work "$W" --runs "$RUNS" --llama "$HAVE_LLAMA"
