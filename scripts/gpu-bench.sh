#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 44's GPU speed figures in one run (budget: about 6 minutes on one H100 with the defaults).
# Beside scripts/gpu-check.sh, for the same hosts (NVIDIA GPU, pip's torch, no package registry):
# uses the agent gpu-check.sh built ($BUILD/prefix/bin/clusterppl-agent), else builds it the same
# way (scripts/build-agent.sh against the torch package's LibTorch). Then, for each shape:
#   model    a random Llama checkpoint of the real config's shape (scripts/gpu_bench_model.py:
#            vocabulary 128,256, bfloat16 safetensors shards of at most 5 GB with an index, as
#            save_pretrained writes them), kept in $MODELS between runs
#   agent    clusterppl-agent eval --device cuda, bfloat16, at its automatic batch, each context
#   eager    scripts/gpu_eager_bench.py on the same model, windows and GPU: transformers' Llama
#            written out, SDPA, bfloat16, the full logits' float32 log-softmax as users write it
#            (its batch: the agent's, halved while it runs out of memory)
#   plan     clusterppl-agent plan --model DIR --context T --gpu-memory (the free memory the agent
#            saw): the batch the plan says auto takes, against the one the run took
# and prints ONE table: tokens/s and MFU of both, the ratio, peak device memory (nvidia-smi, sampled
# every 100 ms: the whole process, caching allocator included), load GB/s (the weight files' bytes
# over the agent's load_seconds), time to first token (first_token_seconds: the process's start to
# the first batch's scores on the host), the plan's batch against the run's. Then, per shape, the
# weights' upload: one window evaluated with --weight-upload pinned (the default: pinned buffers,
# copies on a stream of their own) and pageable (Tensor::to), alternating, twice each, the page
# cache warm for all: load GB/s, the pinned path's host and wait seconds, and the same bits. And
# per shape and context, the agent's --profile of 2 batches before its clock: the kernels' (or on
# the CPU the operators') largest shares of the pass, the device's busy share ($OUT/*.profile.json,
# and *.trace.json, a Chrome trace, where the torch has Kineto).
#
# MFU = tokens/s x FLOPs per token / the bf16 GEMM rate measured on this GPU (8192^3, as
# gpu-check's speed row), FLOPs per token = 2 x the parameters in matrix products (all but the
# embedding lookup; a tied head counts once) + 2 x layers x context x heads x head_dim (QK^T and AV,
# 4 T d per layer for a full row, halved by the causal mask). docs/speed.md, "On a GPU".
#
#   scripts/gpu-bench.sh [--shapes llama-1b,llama-8b] [--contexts 2048,4096] [--tokens-1b N] [--tokens-8b N]
#   CPPL_GPU_BENCH_CPU_ONLY=1   self-test without a GPU (tests/agent/tst_gpu_bench.cpp): the tiny
#       shape, contexts 64 and 128, on the CPU, every step for real, in seconds
#   CPPL_GPU_BENCH_AGENT=PATH   use this agent
#   CPPL_GPU_BENCH_MODELS=DIR   where the checkpoints are written and kept ($BUILD/bench-models)
#   PYTHON=/path/to/python      the interpreter with torch
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
CPU_ONLY="${CPPL_GPU_BENCH_CPU_ONLY:-0}"
BUILD="${CPPL_GPU_BUILD_DIR:-$ROOT/build/gpu}"
OUT="${CPPL_GPU_BENCH_OUT:-$BUILD/gpu-bench}"
MODELS="${CPPL_GPU_BENCH_MODELS:-$BUILD/bench-models}"
SHAPES=llama-1b,llama-8b
CONTEXTS=2048,4096
TOKENS_1B=$((1 << 20))
TOKENS_8B=$((1 << 19))
while (( $# )); do
  case "$1" in
    --shapes) SHAPES="$2"; shift 2 ;;
    --contexts) CONTEXTS="$2"; shift 2 ;;
    --tokens-1b) TOKENS_1B="$2"; shift 2 ;;
    --tokens-8b) TOKENS_8B="$2"; shift 2 ;;
    *) echo "gpu-bench.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
DEVICE=cuda
if [[ "$CPU_ONLY" == 1 ]]; then
  SHAPES=tiny CONTEXTS=64,128 DEVICE=cpu
fi
START=$(date +%s)
FAILED=0
declare -a ROWS=() LOADS=() PROFILES=()
jget() { "$PY" -c 'import json,sys; v=json.load(open(sys.argv[1])); [v:=v[k] for k in sys.argv[2:]]; print(v)' "$@" 2>/dev/null; }
# keep ARRAY LINE: a line of the summary, also printed as it is made, so that a run cut short (the
# device tool's time limit) still says what it measured; the summary at the end repeats them.
keep() { local -n lines=$1; lines+=("$2"); printf '[%4d s] %s\n' "$(( $(date +%s) - START ))" "$2"; }
fail() { keep ROWS "$(printf '%-9s %-5s FAIL  %s' "$1" "$2" "$3")"; FAILED=1; }
errline() { # the agent's own message, else the last line
  local l; l=$(grep -m1 -E '^clusterppl-agent: ' "$1"); [[ -z "$l" ]] && l=$(tail -1 "$1")
  printf '%s' "$l" | cut -c1-200
}
finish() {
  echo
  echo "== gpu-bench summary ($(( $(date +%s) - START )) s; $GPU_NAME; $TORCH_VERSION) =="
  printf '%-9s %-5s %-11s %-22s %-22s %-5s %-15s %-9s %-7s\n' shape ctx "batch p/r" "agent tok/s (MFU)" "eager tok/s (MFU, B)" ratio "peak GiB a/e" "load GB/s" "TTFT s"
  printf '%s\n' "${ROWS[@]}"
  (( ${#LOADS[@]} )) && printf '%s\n' "${LOADS[@]}"
  (( ${#PROFILES[@]} )) && printf '%s\n' "${PROFILES[@]}"
  exit "$FAILED"
}

# 1. The torch package and the GPU.
if ! INFO=$("$PY" -c 'import torch; print(torch.__version__); print(int(torch.cuda.is_available())); print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")' 2>&1); then
  GPU_NAME=- TORCH_VERSION=-; keep ROWS "python torch FAIL $PY cannot import torch: ${INFO##*$'\n'}"; FAILED=1; finish
fi
TORCH_VERSION="torch $(sed -n 1p <<<"$INFO")"
GPU_NAME=$(sed -n 3p <<<"$INFO")
if [[ "$CPU_ONLY" != 1 && $(sed -n 2p <<<"$INFO") != 1 ]]; then
  keep ROWS "CUDA device FAIL torch.cuda.is_available() is False; CPPL_GPU_BENCH_CPU_ONLY=1 for a self-test"; FAILED=1; finish
fi
command -v nvidia-smi >/dev/null && GPU_NAME="$GPU_NAME, driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"

# 2. The agent: given, gpu-check's, or built as gpu-check builds it.
AGENT="${CPPL_GPU_BENCH_AGENT:-$BUILD/prefix/bin/clusterppl-agent}"
if [[ ! -x "$AGENT" ]]; then
  echo "building the agent (scripts/build-agent.sh, log: $BUILD/build-agent.log)"
  mkdir -p "$BUILD"
  "$ROOT/scripts/build-agent.sh" --python "$PY" --build-dir "$BUILD" --prefix "$BUILD/prefix" -- -DCLUSTERPPL_WITH_SENTENCEPIECE=OFF \
      -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON >"$BUILD/build-agent.log" 2>&1
  [[ -x "$AGENT" ]] || { keep ROWS "agent FAIL not built: $(tail -1 "$BUILD/build-agent.log")"; FAILED=1; finish; }
fi
mkdir -p "$OUT" "$MODELS" && rm -f "$OUT"/*.json "$OUT"/*.log "$OUT"/*.u32 "$OUT"/*.mem

# Peak used device memory (MiB) of GPU 0 while a command runs, sampled by nvidia-smi; 0 on the CPU.
with_peak() { # FILE COMMAND...: runs it, writes the peak to FILE
  local file="$1" pid=""; shift
  if [[ "$DEVICE" == cuda ]] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 >"$file.samples" 2>/dev/null & pid=$!
  fi
  "$@"; local rc=$?
  [[ -n "$pid" ]] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
  sort -n "$file.samples" 2>/dev/null | tail -1 >"$file"; [[ -s "$file" ]] || echo 0 >"$file"
  return $rc
}

bench_one() { # SHAPE MODEL CONTEXT TOKENFILE NTOKENS
  local shape="$1" model="$2" T="$3" tokens="$4" n="$5" tag="$1-$3"
  local dev=(--device "$DEVICE"); [[ "$DEVICE" == cpu ]] && dev+=(--dtype bfloat16 --gemm blas --batch 4)
  if ! with_peak "$OUT/$tag.agent.mem" "$AGENT" eval --model "$model" --tokens "$tokens" --context "$T" "${dev[@]}" --quiet \
      --profile "$OUT/$tag.profile.json" --profile-batches 2 --json "$OUT/$tag.agent.json" >"$OUT/$tag.agent.log" 2>&1; then
    fail "$shape" "$T" "agent: $(errline "$OUT/$tag.agent.log")"; return
  fi
  local batch; batch=$(jget "$OUT/$tag.agent.json" batch)
  keep PROFILES "$("$PY" - "$OUT/$tag.profile.json" "$shape" "$T" <<'PY'
import json, sys
path, shape, T = sys.argv[1:]
p = json.load(open(path))
dev = [o for o in p["ops"] if o["device"] == "cuda"] or p["ops"]
top = ", ".join(f"{o['name'][:40]} {o['share_of_wall']:.0%}" for o in dev[:6])
busy = f"device busy {p['device_busy_share']:.0%}, " if p["device_kernels_recorded"] else ""
print(f"profile {shape:<9} {T:<5} {p['batches']} batches, {busy}top: {top}")
PY
)"
  if ! with_peak "$OUT/$tag.eager.mem" "$PY" "$ROOT/scripts/gpu_eager_bench.py" --model "$model" --context "$T" --batch "$batch" --tokens "$n" \
      --device "$DEVICE" --agent-json "$OUT/$tag.agent.json" --json "$OUT/$tag.eager.json" >"$OUT/$tag.eager.log" 2>&1; then
    fail "$shape" "$T" "eager: $(tail -1 "$OUT/$tag.eager.log" | cut -c1-200)"; return
  fi
  local free; free=$(jget "$OUT/$tag.agent.json" batch_from free_bytes)
  local plan=-
  if [[ -n "$free" && "$free" != None ]]; then
    # --ranks 1: the run is one rank without NCCL, so the plan reserves nothing for NCCL's buffers either.
    "$AGENT" plan --model "$model" --context "$T" --ranks 1 --gpu-memory "$("$PY" -c "print($free / 2**30)")" --json "$OUT/$tag.plan.json" \
        >"$OUT/$tag.plan.log" 2>&1 && plan=$(jget "$OUT/$tag.plan.json" memory asked max_batch)
  fi
  keep ROWS "$("$PY" - "$OUT/$tag" "$shape" "$T" "$plan" <<'PY'
import json, sys
tag, shape, T, plan = sys.argv[1:]
a, e = json.load(open(tag + ".agent.json")), json.load(open(tag + ".eager.json"))
peak = [int(open(tag + s).read().split()[0]) / 1024 for s in (".agent.mem", ".eager.mem")]
weights = a["model"].get("weight_file_bytes") or a["model"]["weight_bytes"]
gbps = a.get("load_gb_per_second") or weights / max(a["load_seconds"], 1e-9) / 1e9
ttft = a.get("first_token_seconds")
row = (f"{shape:<9} {T:<5} {plan + '/' + str(a['batch']):<11} "
       f"{a['tokens_per_second']:>10,.0f} ({e['agent_mfu']:5.1%})  {e['eager_tokens_per_second']:>10,.0f} ({e['eager_mfu']:5.1%}, {e['eager_batch']:>3}) "
             f"{e['ratio']:<5.2f} {peak[0]:5.1f} / {peak[1]:5.1f}   {gbps:<9.3g} {ttft if ttft is None else round(ttft, 2)!s}")
print(row.rstrip())
PY
)"
}

load_one() { # SHAPE MODEL TOKENFILE: the weights' upload, pinned against pageable, one window each
  local shape="$1" model="$2" tokens="$3" m i
  local dev=(--device "$DEVICE"); [[ "$DEVICE" == cpu ]] && dev+=(--dtype bfloat16 --gemm blas)
  for i in 1 2; do
    for m in pageable pinned; do
      if ! "$AGENT" eval --model "$model" --tokens "$tokens" --context 64 --batch 1 --max-windows 1 "${dev[@]}" --weight-upload "$m" --quiet \
          --json "$OUT/$shape.load-$m-$i.json" >"$OUT/$shape.load-$m-$i.log" 2>&1; then
        fail "$shape" load "agent --weight-upload $m: $(errline "$OUT/$shape.load-$m-$i.log")"; return
      fi
    done
  done
  local line; line="$("$PY" - "$OUT/$shape" "$shape" <<'PY'
import json, sys
tag, shape = sys.argv[1:]
r = {(m, i): json.load(open(f"{tag}.load-{m}-{i}.json")) for m in ("pinned", "pageable") for i in (1, 2)}
gb = {m: [r[m, i]["load_gb_per_second"] for i in (1, 2)] for m in ("pinned", "pageable")}
up = r["pinned", 2]["model"].get("weight_upload", {})
same = len({j["nll_sum_exact"] for j in r.values()}) == 1
print(f"load {shape:<9} pinned {gb['pinned'][0]:.3g} / {gb['pinned'][1]:.3g} GB/s ({up.get('method', '?')}: host {up.get('host_seconds', 0):.2f} s, "
      f"wait {up.get('wait_seconds', 0):.2f} s), pageable {gb['pageable'][0]:.3g} / {gb['pageable'][1]:.3g} GB/s; "
      + ("same bits" if same else "DIFFERENT BITS: FAIL"))
PY
)"
  keep LOADS "$line"; [[ "$line" == *FAIL* ]] && FAILED=1
}

for shape in ${SHAPES//,/ }; do
  model="$MODELS/$shape"
  case "$shape" in llama-8b) n=$TOKENS_8B ;; tiny) n=4096 ;; *) n=$TOKENS_1B ;; esac
  if ! "$PY" "$ROOT/scripts/gpu_bench_model.py" --shape "$shape" --out "$model" $([[ $shape == tiny ]] && echo --max-shard-bytes 500000) \
      >"$OUT/$shape.make.log" 2>&1; then
    fail "$shape" - "model: $(tail -1 "$OUT/$shape.make.log")"; continue
  fi
  echo "$(cat "$OUT/$shape.make.log") ($(( $(date +%s) - START )) s)"
  vocab=$(jget "$model/config.json" vocab_size)
  "$PY" -c "import numpy as np; np.random.default_rng(0).integers(0, $vocab, $n, dtype=np.uint32).tofile('$OUT/$shape.u32')" 2>/dev/null \
    || "$PY" -c "import torch; torch.randint(0, $vocab, ($n,), generator=torch.Generator().manual_seed(0), dtype=torch.int32).numpy().tofile('$OUT/$shape.u32')"
  load_one "$shape" "$model" "$OUT/$shape.u32"
  echo "$shape load pinned/pageable done ($(( $(date +%s) - START )) s)"
  for T in ${CONTEXTS//,/ }; do
    bench_one "$shape" "$model" "$T" "$OUT/$shape.u32" "$n"
    echo "$shape context $T done ($(( $(date +%s) - START )) s)"
  done
done
finish
