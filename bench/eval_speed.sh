#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Side-by-side, in one run: clusterppl-agent eval (as a user starts it: --gemm auto, no environment
# variables; and each --gemm back end) against a plain PyTorch eager loop (HF-style,
# bench/python/eager_loop.py) on the same weights, threads, batch and context; the fp32 GEMM ceiling
# from bench_sgemm at the same thread count (the best of OpenBLAS, oneDNN and the agent's own
# kernels); peak RSS of the agent. RUNS repetitions: each row is one run, then best/median/worst.
#
#   bench/eval_speed.sh [BUILD_DIR] [THREADS] [WINDOWS] [RUNS] [SHAPES] [GEMMS]
# Shapes: "18m" (hidden 512, 6 layers, 8 heads, 4 KV heads, intermediate 1376, vocab 512) and
# "110m" (hidden 1024, 8 layers, 16 heads, 8 KV heads, intermediate 2816, vocab 4096).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
bench_setup "${1:-}"
THREADS="${2:-2}"
WINDOWS="${3:-16}"
RUNS="${4:-3}"
SHAPE_LIST="${5:-18m 110m}"
GEMMS="${6:-auto onednn blas}"

bench_tokens "$WORK/tokens.u32" 600000 512
# The byte ids drawn after those 600,000, as they always were (the same file as before common.sh).
"$PY" -c 'import numpy as np; np.random.seed(0); np.random.randint(0, 512, 600000); np.random.randint(0, 256, 4096).astype("<u4").tofile("'"$WORK"'/tokens-bytes.u32")'
declare -A SHAPES=(
  [18m]="--vocab 512 --hidden 512 --layers 6 --heads 8 --kv-heads 4 --intermediate 1376 --max-positions 1024"
  [110m]="--vocab 4096 --hidden 1024 --layers 8 --heads 16 --kv-heads 8 --intermediate 2816 --max-positions 1024"
)
sgemm() { "$BUILD/bench/bench_sgemm" "$THREADS" 4096 "$1" "$2" "$3" | "$PY" -c 'import json,sys;print(json.load(sys.stdin)["gflops"])'; }
echo "threads=$THREADS windows=$WINDOWS batch=8 context=512 (hf-sliding, stride 512) runs=$RUNS; $(bench_load)"
printf '%-5s %-4s %-16s %10s %11s %11s %7s %8s %12s %8s\n' shape run gemm params agent_tok/s eager_tok/s x_eager GFLOP/s %best_sgemm rss_MB
for shape in $SHAPE_LIST; do
  dir="$WORK/llama-$shape"
  bench_checkpoint "$dir" --arch llama ${SHAPES[$shape]}
  read -r hidden inter layers heads hd <<<"$("$PY" -c 'import json;c=json.load(open("'"$dir"'/config.json"));print(c["hidden_size"],c["intermediate_size"],c["num_hidden_layers"],c["num_attention_heads"],c["hidden_size"]//c["num_attention_heads"])')"
  : >"$WORK/rows-$shape"
  for run in $(seq 1 "$RUNS"); do
    sgb=$(sgemm "$hidden" "$inter" blas); sgo=$(sgemm "$hidden" "$inter" onednn); sgn=$(sgemm "$hidden" "$inter" native)
    best=$("$PY" -c "print(max($sgb, $sgo, $sgn))")
    "$PY" "$ROOT/bench/python/eager_loop.py" --model "$dir" --tokens "$WORK/tokens.u32" --context 512 --batch 8 \
        --threads "$THREADS" --max-windows "$WINDOWS" > "$WORK/eager-$shape.json"
    for gemm in $GEMMS; do
      /usr/bin/time -f "%M" -o "$WORK/rss-$shape-$gemm" "$BUILD/agent/clusterppl-agent" eval --model "$dir" --tokens "$WORK/tokens.u32" \
          --context 512 --batch 8 --max-windows "$WINDOWS" --threads "$THREADS" --gemm "$gemm" --quiet --json "$WORK/agent-$shape-$gemm.json" >/dev/null
      "$PY" - "$WORK" "$shape" "$gemm" "$best" "$layers" "$heads" "$hd" "$run" <<'PY' | tee -a "$WORK/rows-$shape"
import json, sys
work, shape, gemm, best = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
layers, heads, hd, run = map(int, sys.argv[5:])
a = json.load(open(f"{work}/agent-{shape}-{gemm}.json")); e = json.load(open(f"{work}/eager-{shape}.json"))
rss = int(open(f"{work}/rss-{shape}-{gemm}").read().split()[-1]) / 1024
params = a["model"]["params"]
# Every input position runs the whole network: 2 FLOPs per parameter plus attention (QK^T and AV over
# the full 512 x 512 score matrix, as llama.cpp counts it), per input token.
tok_in = a["windows"] * 512 / a["seconds"]
flops = tok_in * (2 * params + 4 * layers * heads * hd * 512) / 1e9
print("%-5s %-4d %-16s %10d %11.0f %11.0f %7.2f %8.1f %11.0f%% %8.0f" % (shape, run, gemm + "/" + a["gemm"].replace("native-", "n-"), params, tok_in,
      e["tokens_per_second"], tok_in / e["tokens_per_second"], flops, 100 * flops / best, rss))
PY
    done
    echo "      sgemm [4096 x $hidden] x [$hidden x $inter], GFLOP/s: OpenBLAS $sgb, oneDNN $sgo, native $sgn (best $best); $(bench_load)"
  done
  "$PY" - "$WORK/rows-$shape" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    rows[f[2]].append((float(f[4]), float(f[6]), float(f[8].rstrip('%'))))
for gemm, r in rows.items():
    tok = sorted(x[0] for x in r); ratio = sorted(x[1] for x in r); pct = sorted(x[2] for x in r)
    print("      %-16s tok/s best/median/worst %.0f/%.0f/%.0f; x eager %.2f/%.2f/%.2f; %% of best sgemm %.0f/%.0f/%.0f" % (
        gemm, tok[-1], statistics.median(tok), tok[0], ratio[-1], statistics.median(ratio), ratio[0], pct[-1], statistics.median(pct), pct[0]))
PY
  echo "      weights: $("$PY" -c "import os;print(round(os.path.getsize('$dir/model.safetensors')/2**20))") MB float32"
done
# Memory: peak RSS at batch 1 (small activations) minus the same run's RSS with the 1.7M-parameter
# embedded model (LibTorch and the process itself), against the weights' size.
base=$( { /usr/bin/time -f "%M" "$BUILD/agent/clusterppl-agent" eval --model "$ROOT/resources/models/shakespeare-byte-llama" \
          --tokens "$WORK/tokens-bytes.u32" --context 512 --batch 1 --max-windows 2 --threads "$THREADS" --quiet >/dev/null; } 2>&1 | tail -1)
for shape in $SHAPE_LIST; do
  for gemm in $GEMMS; do
    rss=$( { /usr/bin/time -f "%M" "$BUILD/agent/clusterppl-agent" eval --model "$WORK/llama-$shape" --tokens "$WORK/tokens.u32" \
            --context 512 --batch 1 --max-windows 2 --threads "$THREADS" --gemm "$gemm" --quiet >/dev/null; } 2>&1 | tail -1)
    weights=$(stat -c %s "$WORK/llama-$shape/model.safetensors")
    "$PY" -c "print('memory %-5s %-7s peak RSS %5.0f MB, baseline %4.0f MB, model %5.0f MB = %.2fx the %4.0f MB of weights' % ('$shape', '$gemm', $rss/1024, $base/1024, ($rss-$base)/1024, ($rss-$base)*1024/$weights, $weights/2**20))"
  done
done
echo "BLAS: $(sed -n 's/.*"blas": "\(.*\)".*/\1/p' "$WORK/agent-$(echo $SHAPE_LIST | cut -d' ' -f1)-$(echo $GEMMS | cut -d' ' -f1).json" | head -1)"
