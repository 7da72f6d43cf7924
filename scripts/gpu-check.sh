#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The checks that need a GPU, in one run (budget: under 8 minutes on one GPU). For a host with
# NVIDIA GPUs, CUDA (+ NCCL) and PyTorch installed with pip, and no package registry: builds only the
# agent against the torch package's own LibTorch, then proves the GPU path and prints ONE table:
#   cmake ... installed agent   scripts/build-agent.sh's rows: the headers of the NCCL LibTorch
#                     loads (nccl.h: the pip package's first), the CUDA compiler LibTorch's CMake
#                     config needs (nvcc: PATH, CUDACXX or /usr/local/cuda/bin), configure (no NCCL
#                     on a GPU host is a failure; no Gloo headers a warning, below), build (on
#                     failure the compiler's or linker's own line), install into $BUILD/prefix, and
#                     the installed agent run in a clean environment (libraries found without
#                     LD_LIBRARY_PATH, preflight, a short eval); the rows below use that agent
#   preflight         the CUDA runtime / NCCL files and versions the agent actually loaded
#   eval cpu          the embedded model on the CPU (the reference for the rows below)
#   eval cuda fp32    same ppl as the CPU within 1e-4 (TF32 off)
#   eval cuda bf16    the GPU default dtype; ppl within 2% of float32; the warm-up batch's seconds
#   weights pinned = pageable  the bf16 run again with --weight-upload pageable (Tensor::to): the
#                     same nll_sum_exact as the default's pinned buffers and copy stream; both GB/s
#   eval cuda int8/int4  --quantize on the GPU (weight-only: codes on the device, each layer dequantized
#                     into one shared bfloat16 buffer): ppl within 2% of the CPU's quantized run on
#                     --gemm blas (the same dequantized weights in float32); the weights held
#                     (model.weight_bytes) against the quantized size plus the float embeddings/norms
#   eval cuda gqa     a small grouped-query (GQA) Llama, float32: the GPU's fused attention with
#                     K/V heads shared, same ppl as the CPU within 1e-4
#   default batch     no --batch on cuda: the batch sized from free memory (batch_from in the
#                     result), ppl within 2% of float32
#   gloo = nccl       on cuda, --backend gloo and --backend nccl at world size min(GPUs, 2): the
#                     same nll_sum_exact (the reduction itself, not only staging)
#   gloo 2 ranks      2 ranks on cuda over Gloo (sharing the GPU when there is one): the one-rank
#                     run's nll_sum_exact, so a real reduction of GPU sums even on one GPU
#   nccl ranks > GPUs GPUs + 1 NCCL ranks on this host are refused before NCCL starts, saying why
#   comm-check nccl   large +- int64 words whose exact sums are known, at world size = GPUs (>= 2
#                     when there are two; NCCL allows one rank per GPU), flat and hierarchical
#   lost rank nccl    2 or 3 NCCL ranks (>= 2 GPUs; skipped with one) under the defaults (the
#                     dynamic schedule, --on-rank-loss continue: no flag says it), the last rank
#                     killed with SIGKILL at 20% of the tokens: exit 0, the one-rank nll_sum_exact,
#                     the rank in lost_ranks, on_rank_loss continue in the result
#   1-GPU nccl ...    the test mode CLUSTERPPL_NCCL_SHARE_GPU=1 (several NCCL ranks on one GPU, each
#                     its own NCCL host): comm-check at 2 and 4 ranks, flat and in groups of two; what
#                     the communicators take of the GPU's memory per rank; evals at 2 (flat) and 4
#                     (groups of two) ranks bit-identical to one rank and to Gloo; a killed rank
#                     among 3 regrouped (shrink or a new communicator, as this NCCL has); a rank
#                     stopped with SIGSTOP caught within --timeout
#   tensor-parallel   --tensor-parallel 2 (issue 40): two ranks of this host split the model over
#                     Gloo on the CPU (the native float32 kernels, dynamic schedule): within 1e-6
#                     relative PPL of one rank, and the weights each rank holds; on cuda over NCCL
#                     (two ranks sharing the GPU when there is one: CLUSTERPPL_NCCL_SHARE_GPU=1):
#                     float32 within 1e-6 of the one-rank cuda float32 run (TF32 off), bfloat16's
#                     deviation from the one-rank bf16 run printed (limit 2%), the weights per
#                     rank; 2 x 2 (4 ranks) the 2 x 1 run's nll_sum_exact
#   speed bf16        tokens/s and MFU of the agent vs a PyTorch eager loop on the same GPU and model
#                     (both at batch 8), and the agent's tokens/s at its default batch
# A failing row shows the failing program's own error line. Exit status 0 only when no row failed.
# An agent without Gloo (a pip torch carries no gloo/ headers) is a warning, not a failure: NCCL
# carries GPU ranks. The rows that need Gloo then say skip; CPPL_GPU_CHECK_GLOO_INCLUDE=DIR builds
# with Gloo's headers from DIR (scripts/build-agent.sh --gloo-include).
#
#   scripts/gpu-check.sh                        PYTHON=/path/to/python picks the interpreter
#   CPPL_GPU_CHECK_CPU_ONLY=1 scripts/gpu-check.sh
#       self-test without a GPU (CI runs it, tests/agent/tst_gpu_check.cpp): the CPU rows, the
#       Gloo self-tests, the default batch (from made-up free memory) and the lost-rank row over
#       Gloo (3 ranks on the CPU) run for real, GPU rows are reported as skipped.
#   CPPL_GPU_CHECK_FAKES=DIR    with CPPL_GPU_CHECK_CPU_ONLY=1: the "1-GPU nccl" and tensor-parallel
#       NCCL rows run too, on the CPU against the fake CUDA runtime and NCCL in DIR (build/default/tests/fakes/lib, made by
#       the cppl_fakes target; tests/fakes/README.md), so that their logic runs before a GPU does
#       (tests/agent/tst_gpu_check.cpp)
#   CPPL_GPU_CHECK_AGENT=PATH   use this agent instead of building one (CI's self-test does; the
#       configure and build rows were run here with CPPL_GPU_CHECK_CPU_ONLY=1 PYTHON=/usr/bin/python3)
#   CPPL_GPU_CHECK_MODEL=DIR    evaluate this model instead of the embedded one
#   CPPL_GPU_CHECK_GLOO_INCLUDE=DIR  Gloo's installed headers for the agent's build (see above)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
CPU_ONLY="${CPPL_GPU_CHECK_CPU_ONLY:-0}"
FAKES="${CPPL_GPU_CHECK_FAKES:-}"
BUILD="${CPPL_GPU_BUILD_DIR:-$ROOT/build/gpu}"
OUT="${CPPL_GPU_CHECK_OUT:-$BUILD/gpu-check}"
MODEL="${CPPL_GPU_CHECK_MODEL:-$ROOT/resources/models/shakespeare-byte-llama}"
START=$(date +%s)
declare -a ROWS=()
FAILED=0
# Each row is also printed as it is made, so that a run cut short (the device tool's time limit)
# still says what it did; the table at the end repeats them.
row() {
  ROWS+=("$(printf '%-30s %-5s %s' "$1" "$2" "$3")"); [[ "$2" == FAIL ]] && FAILED=1
  printf '[%4d s] %s\n' "$(( $(date +%s) - START ))" "${ROWS[-1]}"; return 0
}
finish() {
  echo
  echo "== gpu-check summary ($(( $(date +%s) - START )) s) =="
  printf '%-30s %-5s %s\n' "check" "result" "detail"
  printf '%s\n' "${ROWS[@]}"
  exit "$FAILED"
}
# The failing program's own message: a rank's "clusterppl-agent: ..." line, else the launcher's
# verdict (never its start banner), else the last line.
errline() {
  local l
  l=$(grep -m1 -E '^(\[rank [0-9]+\] )?clusterppl-agent: ' "$1")
  [[ -z "$l" ]] && l=$(grep -E '^clusterppl-agent run: ' "$1" | grep -v -E 'local ranks, store' | tail -1)
  [[ -z "$l" ]] && l=$(grep -v '^[[:space:]]*$' "$1" | tail -1)
  printf '%s' "${l:-no output (see $1)}" | cut -c1-220
}
jget() { "$PY" -c 'import json,sys; v=json.load(open(sys.argv[1])); [v:=v[k] for k in sys.argv[2:]]; print(v)' "$@" 2>/dev/null; }
pyc() { "$PY" -c "$@"; }

# 1. The torch package: LibTorch's CMake config, CUDA, the GPUs.
if ! TORCH_INFO=$("$PY" - <<'PY' 2>&1
import torch
print(torch.utils.cmake_prefix_path)
print(torch.__version__)
print(int(torch.cuda.is_available()))
print(torch.cuda.device_count() if torch.cuda.is_available() else 0)
print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
PY
); then
  row "python torch" FAIL "$PY cannot import torch: ${TORCH_INFO##*$'\n'}"
  finish
fi
TORCH_PREFIX=$(sed -n 1p <<<"$TORCH_INFO")
HAS_CUDA=$(sed -n 3p <<<"$TORCH_INFO")
GPUS=$(sed -n 4p <<<"$TORCH_INFO")
GPU_NAME=$(sed -n 5p <<<"$TORCH_INFO")
row "torch package" ok "$(sed -n 2p <<<"$TORCH_INFO") at $TORCH_PREFIX"
if [[ "$CPU_ONLY" != 1 && "$HAS_CUDA" != 1 ]]; then
  row "CUDA device" FAIL "torch.cuda.is_available() is False (no GPU, or a CPU-only torch); CPPL_GPU_CHECK_CPU_ONLY=1 for a self-test"
  finish
fi
[[ "$HAS_CUDA" == 1 ]] && row "CUDA devices" ok "$GPUS x $GPU_NAME"
if [[ -n "$FAKES" && ( "$CPU_ONLY" != 1 || ! -f "$FAKES/libnccl.so.2" || ! -f "$FAKES/libcudart.so.13" ) ]]; then
  row "fakes" FAIL "CPPL_GPU_CHECK_FAKES=$FAKES: $([[ "$CPU_ONLY" != 1 ]] && echo "goes with CPPL_GPU_CHECK_CPU_ONLY=1" || echo "no libnccl.so.2 and libcudart.so.13 there (the cppl_fakes target's lib directory)")"
  finish
fi

# 2. The agent: given, or built against the torch package (no Qt, no tests, no registry).
if [[ -n "${CPPL_GPU_CHECK_AGENT:-}" ]]; then
  AGENT="$CPPL_GPU_CHECK_AGENT"
  [[ -x "$AGENT" ]] && row "agent" ok "given: $AGENT" || { row "agent" FAIL "CPPL_GPU_CHECK_AGENT=$AGENT is not an executable"; finish; }
else
  # scripts/build-agent.sh builds it (nccl.h and nvcc found as a user's build finds them), installs
  # it into $BUILD/prefix and runs the installed agent in a clean environment: every row below then
  # runs the agent as a node would, LibTorch found through its RUNPATH. Its rows join this table.
  # The GPU check keeps to what the torch package brings: no pkg-config, the carried JSON header.
  rows="$BUILD/build-agent.rows"
  mkdir -p "$BUILD" && rm -f "$rows"
  gloo=(); [[ -n "${CPPL_GPU_CHECK_GLOO_INCLUDE:-}" ]] && gloo=(--gloo-include "$CPPL_GPU_CHECK_GLOO_INCLUDE")
  CPPL_BUILD_AGENT_ROWS="$rows" "$ROOT/scripts/build-agent.sh" --python "$PY" --build-dir "$BUILD" --prefix "$BUILD/prefix" "${gloo[@]}" -- \
      -DCLUSTERPPL_WITH_SENTENCEPIECE=OFF -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
      >"$BUILD/build-agent.log" 2>&1
  built=0
  while IFS=$'\t' read -r name result detail; do
    case "$name" in
      "torch package") continue ;; # step 1 said it
      build) [[ "$result" == ok ]] && built=1 ;;
    esac
    row "$name" "$result" "$detail"
  done <"$rows"
  [[ -s "$rows" ]] || row "build-agent.sh" FAIL "no rows: see $BUILD/build-agent.log"
  (( built )) || finish
  AGENT="$BUILD/prefix/bin/clusterppl-agent"
  if ! grep -q -P '^installed agent: eval \w+\tok\t' "$rows"; then
    AGENT="$BUILD/agent/clusterppl-agent" # the rows below still tell the GPU path's story
    row "agent" FAIL "the installed agent did not run (rows above); the rows below use the build tree's, $AGENT"
  fi
fi
mkdir -p "$OUT" && rm -rf "$OUT"/*.log "$OUT"/*.json "$OUT"/*.failed "$OUT"/*.u32 "$OUT"/bench-model "$OUT"/gqa-model # nothing stale from an earlier run

# 3. What the agent loads (RTLD_NOLOAD first: LibTorch's own CUDA runtime and NCCL).
if "$AGENT" preflight >"$OUT/preflight.log" 2>&1 || [[ "$CPU_ONLY" == 1 ]]; then
  row "preflight" ok "$(sed -n 2p "$OUT/preflight.log" | cut -c1-220)"
else
  row "preflight" FAIL "$(grep -m1 '^problem' "$OUT/preflight.log" || errline "$OUT/preflight.log")"
fi
# Whether the agent can combine ranks over Gloo (preflight's first line says when it cannot).
NO_GLOO=""
grep -q 'gloo unavailable' "$OUT/preflight.log" \
  && NO_GLOO="this agent has no Gloo (built without Gloo's headers; CPPL_GPU_CHECK_GLOO_INCLUDE=DIR names them)"

# 4. The embedded model on the CPU, then on the GPU.
EVAL0=(--model "$MODEL" --text "$ROOT/resources/data/tinyshakespeare-heldout.txt" --tokenizer bytes --protocol llama.cpp --context 256 --quiet)
[[ "$CPU_ONLY" == 1 ]] && EVAL0+=(--max-windows 48) # the self-test checks the logic, not the numbers: keep CI short
EVAL=("${EVAL0[@]}" --batch 8)
eval_row() { # NAME JSON LOG ARGS...: runs eval, fills the row on failure; returns its status
  local name="$1" json="$2" log="$3"; shift 3
  if "$AGENT" eval "${EVAL[@]}" "$@" --json "$json" >"$log" 2>&1; then return 0; fi
  row "$name" FAIL "$(errline "$log")"; return 1
}
# The default batch's row: no --batch, the batch sized from free memory (ENV... set before the agent).
default_batch_row() { # NAME JSON LOG REFJSON ENV... -- ARGS...
  local name="$1" json="$2" log="$3" ref="$4"; shift 4
  local envs=(); while [[ $# -gt 0 && "$1" != -- ]]; do envs+=("$1"); shift; done; shift
  if ! env "${envs[@]}" "$AGENT" eval "${EVAL0[@]}" "$@" --json "$json" >"$log" 2>&1; then row "$name" FAIL "$(errline "$log")"; return; fi
  local src b lim d ok
  src=$(jget "$json" batch_from source); b=$(jget "$json" batch); lim=$(jget "$json" batch_from limited_by)
  read -r d ok < <(rel "$(jget "$ref" ppl)" "$(jget "$json" ppl)" 2e-2)
  if [[ "$src" != "free memory" ]]; then row "$name" FAIL "$(jget "$json" batch_from reason)"; return; fi
  row "$name" "$([[ $ok == 1 ]] && echo ok || echo FAIL)" \
      "batch $b from $src (limited by $lim), ppl rel. diff $d (limit 2e-2), $(jget "$json" tokens_per_second) tok/s"
}
# A lost rank: N ranks under the defaults (--schedule dynamic, --on-rank-loss continue: said by no
# flag, so the row proves the default for the backend); the last one, slowed
# (CLUSTERPPL_TEST_SLOW_RANK) so that the run lasts, is killed with SIGKILL once rank 0's round
# line reports 20% of the tokens. The run must exit 0 with REFJSON's nll_sum_exact (a one-rank run
# of EVAL0 with --batch BATCH), the rank in lost_ranks. Short rounds (--sync-every-tokens 200): the
# slowed rank paces them, so the run lasts several rounds after the kill.
lost_rank_row() { # NAME N REFJSON BATCH ARGS...
  local name="$1" n="$2" ref="$3" batch="$4"; shift 4
  local victim=$(( n - 1 )) log="$OUT/lost-$n${LOST_TAG:+-$LOST_TAG}.log" json="$OUT/lost-$n${LOST_TAG:+-$LOST_TAG}.json" args=() a lp vp="" p frac=0 rc waited=0
  for a in "${EVAL0[@]}"; do [[ "$a" == --quiet ]] || args+=("$a"); done # rank 0's round lines place the kill
  CLUSTERPPL_TEST_SLOW_RANK="$victim:300" "$AGENT" run --standalone --nproc-per-node "$n" -- "${args[@]}" --batch "$batch" "$@" \
    --sync-every-tokens 200 --timeout 60 --json "$json" >"$log" 2>&1 &
  lp=$!
  while (( waited < 1200 )) && kill -0 "$lp" 2>/dev/null; do # up to 120 s
    frac=$(grep -oE '\] ppl [0-9.]+  [0-9]+/[0-9]+ tokens' "$log" | tail -1 | sed -E 's/.*  ([0-9]+)\/([0-9]+) tokens/\1 \2/' \
             | { read -r x y && echo $(( y > 0 ? 100 * x / y : 0 )) || echo 0; })
    (( frac >= 20 )) && break
    sleep 0.1; waited=$(( waited + 1 ))
  done
  for p in $(pgrep -P "$lp" 2>/dev/null); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$victim" && vp=$p
  done
  if (( frac < 20 )) || [[ -z "$vp" ]]; then
    kill -KILL "$lp" 2>/dev/null; wait "$lp" 2>/dev/null
    row "$name" FAIL "rank 0 never reported 20% of the tokens with rank $victim running (at ${frac}%): $(errline "$log")"; return
  fi
  kill -KILL "$vp"
  wait "$lp"; rc=$?
  if (( rc != 0 )); then row "$name" FAIL "exit $rc after killing rank $victim at ${frac}%: $(errline "$log")"; return; fi
  local mine theirs lost how policy
  mine=$(jget "$json" nll_sum_exact); theirs=$(jget "$ref" nll_sum_exact); policy="$(jget "$json" on_rank_loss)/$(jget "$json" schedule)"
  if [[ "$policy" != continue/dynamic ]]; then row "$name" FAIL "the default ran as on_rank_loss/schedule $policy, not continue/dynamic"; return; fi
  lost=$(pyc "import json,sys; print(','.join(str(l['rank']) for l in json.load(open(sys.argv[1])).get('lost_ranks', [])))" "$json" 2>/dev/null)
  how=$(grep -m1 -oE 'nccl regrouping \([^)]*\): .*' "$log" | sed -E 's/^nccl regrouping \([^)]*\): //' | cut -c1-70)
  row "$name" "$([[ -n "$mine" && "$mine" == "$theirs" && "$lost" == "$victim" ]] && echo ok || echo FAIL)" \
      "$n ranks, rank $victim killed at ${frac}%: nll_sum_exact $([[ -n "$mine" && "$mine" == "$theirs" ]] && echo identical || echo "DIFFERS ($mine vs $theirs)"), lost_ranks [$lost]${how:+; $how}"
}
rel() { pyc "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{abs(a-b)/a:.2e}', int(abs(a-b)/a <= float(sys.argv[3])))" "$@"; }
# Tensor parallelism (issue 40): two ranks of this host split the model; the matmuls' sums run in
# another order, so the PPL is one rank's within 1e-6 (float32), not its bits.
tp_cpu_row() {
  local name="tensor-parallel 2 (cpu, gloo)"
  if [[ -n "$NO_GLOO" ]]; then row "$name" skip "$NO_GLOO"; return; fi
  if [[ $CPU_OK != 1 ]]; then row "$name" FAIL "no one-rank cpu run to compare with (eval cpu failed)"; return; fi
  if ! "$AGENT" run --standalone --nproc-per-node 2 -- "${EVAL[@]}" --device cpu --threads 1 --tensor-parallel 2 --schedule dynamic \
       --timeout 120 --json "$OUT/tp-cpu.json" >"$OUT/tp-cpu.log" 2>&1; then
    row "$name" FAIL "$(errline "$OUT/tp-cpu.log")"; return
  fi
  local d ok
  read -r d ok <<<"$(rel "$(jget "$OUT/cpu.json" ppl)" "$(jget "$OUT/tp-cpu.json" ppl)" 1e-6)"
  row "$name" "$([[ $ok == 1 ]] && echo ok || echo FAIL)" \
      "ppl $(jget "$OUT/tp-cpu.json" ppl), rel. diff to 1 rank $d (limit 1e-6); weights per rank $(jget "$OUT/tp-cpu.json" tensor_parallel weights_bytes_per_rank) of $(jget "$OUT/cpu.json" model weight_bytes) bytes"
}
# The same on the GPU over NCCL (LibTorch's path): two ranks share the GPU where there is one
# (CLUSTERPPL_NCCL_SHARE_GPU=1: each rank its own NCCL_HOSTID, NCCL_NET=Socket). On the device
# NDEV (below), against the one-rank float32 and bfloat16 runs the caller names, so that
# fake_tp_rows runs the same rows on the fakes.
ranks_on() { # N: where N ranks run, in words
  if [[ -n "$FAKES" ]]; then echo "$1 ranks on fake GPU 0, model on the CPU"
  elif (( GPUS < $1 )); then echo "$1 ranks on $GPUS GPU(s)"
  else echo "$1 GPUs"; fi
}
tp_cuda_run() { # WORLD JSON LOG EVAL-ARGS...
  local world=$1 json=$2 log=$3; shift 3
  local share=(); (( GPUS < world )) && share=(env CLUSTERPPL_NCCL_SHARE_GPU=1)
  "${share[@]}" "$AGENT" run --standalone --nproc-per-node "$world" -- "${EVAL[@]}" --device "$NDEV" --backend nccl --tensor-parallel 2 \
    --timeout 120 "$@" --json "$json" >"$log" 2>&1
}
tp_cuda_rows() { # REF32 REF16: the one-rank float32 and bfloat16 runs
  local name="tensor-parallel 2 cuda fp32" d ok where TP32REF=$1 TP16REF=$2
  where=$(ranks_on 2)
  if [[ ! -f "$TP32REF" ]]; then
    row "$name" FAIL "no one-rank float32 run to compare with ($TP32REF)"
  elif tp_cuda_run 2 "$OUT/tp-cuda32.json" "$OUT/tp-cuda32.log" --dtype float32 --tf32 off; then
    read -r d ok <<<"$(rel "$(jget "$TP32REF" ppl)" "$(jget "$OUT/tp-cuda32.json" ppl)" 1e-6)"
    row "$name" "$([[ $ok == 1 ]] && echo ok || echo FAIL)" \
        "$where: ppl $(jget "$OUT/tp-cuda32.json" ppl), rel. diff to 1 rank $d (limit 1e-6, TF32 off); weights per rank $(jget "$OUT/tp-cuda32.json" tensor_parallel weights_bytes_per_rank) of $(jget "$TP32REF" model weight_bytes) bytes"
  else
    row "$name" FAIL "$(errline "$OUT/tp-cuda32.log")"
  fi
  name="tensor-parallel 2 cuda bf16"
  if [[ ! -f "$TP16REF" ]]; then
    row "$name" FAIL "no one-rank bfloat16 run to compare with ($TP16REF)"
  elif tp_cuda_run 2 "$OUT/tp-cuda16.json" "$OUT/tp-cuda16.log" --dtype bfloat16; then
    read -r d ok <<<"$(rel "$(jget "$TP16REF" ppl)" "$(jget "$OUT/tp-cuda16.json" ppl)" 2e-2)"
    row "$name" "$([[ $ok == 1 ]] && echo ok || echo FAIL)" \
        "$where: ppl $(jget "$OUT/tp-cuda16.json" ppl), deviation from 1 rank bf16 $d (limit 2e-2); weights per rank $(jget "$OUT/tp-cuda16.json" tensor_parallel weights_bytes_per_rank) bytes"
  else
    row "$name" FAIL "$(errline "$OUT/tp-cuda16.log")"
  fi
  # 2 x 2 (two groups, on shared GPUs where there are fewer than 4): the 2 x 1 run's bits.
  name="tensor-parallel 2x2 cuda = 2x1"
  if [[ ! -f "$OUT/tp-cuda32.json" ]]; then
    row "$name" FAIL "no 2 x 1 run to compare with (tensor-parallel 2 cuda fp32 failed)"
  elif tp_cuda_run 4 "$OUT/tp-cuda32x2.json" "$OUT/tp-cuda32x2.log" --dtype float32 --tf32 off; then
    local a b
    a=$(jget "$OUT/tp-cuda32.json" nll_sum_exact); b=$(jget "$OUT/tp-cuda32x2.json" nll_sum_exact)
    row "$name" "$([[ -n "$a" && "$a" == "$b" ]] && echo ok || echo FAIL)" \
        "$(ranks_on 4): nll_sum_exact $([[ -n "$a" && "$a" == "$b" ]] && echo identical || echo "DIFFERS ($a vs $b)")"
  else
    row "$name" FAIL "$(errline "$OUT/tp-cuda32x2.log")"
  fi
}
# Several NCCL ranks on ONE GPU (the test mode, CLUSTERPPL_NCCL_SHARE_GPU=1: each rank its own
# NCCL host through NCCL_HOSTID, over the socket transport; docs/communication.md): 2 and 4 ranks,
# flat and in node groups of two (reduce and broadcast cross ranks), comm-check exact and an eval
# bit-identical to Gloo and to one rank; a killed rank among 3 regrouped (shrink or a new
# communicator: the row says which this NCCL has); a stopped rank caught; and what NCCL's
# communicators take of the GPU's memory, per rank (the automatic batch size's reserve).
# The device the rows evaluate on (NDEV), their one-rank reference (NREF: the bf16 run) and its
# batch (NBATCH), Gloo's 2-rank run (NGLOO) and the stopped rank's --timeout (NSTOP) are
# variables: with CPPL_GPU_CHECK_FAKES the same rows run on the CPU against the fake CUDA runtime
# and NCCL (share_rows, fake_share_rows), so that their logic has run before a GPU is lent.
SHARE=(env CLUSTERPPL_NCCL_SHARE_GPU=1)
NDEV=cuda NREF="" NBATCH=8 NGLOO="$OUT/gloo2.json" NSTOP=15 NWHERE="cuda:0"
share_comm_row() { # N TOPOLOGY
  local n=$1 topo=$2 log="$OUT/share-comm-$1-$2.log" groups=()
  [[ $topo == hierarchical ]] && groups=(--groups size:2)
  local name="1-GPU nccl comm-check $n ${topo:0:4}"
  if "${SHARE[@]}" "$AGENT" run --standalone --nproc-per-node "$n" "${groups[@]}" -- comm-check --backend nccl --topology "$topo" \
       --timeout 120 >"$log" 2>&1; then
    row "$name" ok "$n ranks on $NWHERE, $(grep -c ': exact,' "$log") sizes exact; $(grep '1048577 words' "$log" | sed 's/.*exact, //')"
  else
    row "$name" FAIL "$(errline "$log")"
  fi
}
share_eval_row() { # N TOPOLOGY: nll_sum_exact against one rank (NREF) and Gloo's 2 ranks (NGLOO)
  local n=$1 topo=$2 json="$OUT/share-eval-$1-$2.json" log="$OUT/share-eval-$1-$2.log" groups=()
  [[ $topo == hierarchical ]] && groups=(--groups size:2)
  local name="1-GPU nccl eval $n ${topo:0:4}"
  if [[ ! -f "$NREF" ]]; then row "$name" FAIL "no one-rank run to compare with ($NREF)"; return; fi
  if ! "${SHARE[@]}" "$AGENT" run --standalone --nproc-per-node "$n" "${groups[@]}" -- "${EVAL0[@]}" --batch "$NBATCH" --device "$NDEV" --backend nccl \
       --topology "$topo" --sync-every-tokens 8192 --timeout 120 --json "$json" >"$log" 2>&1; then
    row "$name" FAIL "$(errline "$log")"; return
  fi
  local mine one gloo
  mine=$(jget "$json" nll_sum_exact); one=$(jget "$NREF" nll_sum_exact); gloo=$(jget "$NGLOO" nll_sum_exact)
  local same=$([[ -n "$mine" && "$mine" == "$one" && ( -n "$NO_GLOO" || "$mine" == "$gloo" ) ]] && echo ok || echo FAIL)
  row "$name" "$same" "$(jget "$json" world_size) ranks, $(jget "$json" rounds) rounds: nll_sum_exact $([[ "$mine" == "$one" ]] && echo "= 1 rank" || echo "DIFFERS from 1 rank ($mine vs $one)"), $([[ -n "$NO_GLOO" ]] && echo "gloo: skipped" || { [[ "$mine" == "$gloo" ]] && echo "= gloo 2 ranks" || echo "DIFFERS from gloo ($gloo)"; })"
}
# A stopped rank (SIGSTOP) among 3, failing fast (--on-rank-loss fail, --timeout NSTOP): the run must
# end within the timeout and a margin, saying which rank stopped responding (the watchdog) or whose
# collective did not finish (the poll).
share_stopped_row() {
  local name="1-GPU nccl stopped rank" log="$OUT/share-stopped.log" args=() a lp vp="" p waited=0 rc t0
  for a in "${EVAL0[@]}"; do [[ "$a" == --quiet ]] || args+=("$a"); done
  CLUSTERPPL_TEST_SLOW_RANK="2:300" "${SHARE[@]}" "$AGENT" run --standalone --nproc-per-node 3 -- "${args[@]}" --batch "$NBATCH" --device "$NDEV" \
    --backend nccl --on-rank-loss fail --sync-every-tokens 200 --timeout "$NSTOP" >"$log" 2>&1 &
  lp=$!
  while (( waited < 1200 )) && kill -0 "$lp" 2>/dev/null && ! grep -q '\] ppl ' "$log"; do sleep 0.1; waited=$(( waited + 1 )); done
  for p in $(pgrep -P "$lp" 2>/dev/null); do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=2" && vp=$p; done
  if [[ -z "$vp" ]] || ! grep -q '\] ppl ' "$log"; then
    kill -KILL "$lp" 2>/dev/null; wait "$lp" 2>/dev/null; row "$name" FAIL "no round reported with rank 2 running: $(errline "$log")"; return
  fi
  t0=$(date +%s); kill -STOP "$vp"
  waited=0
  while kill -0 "$lp" 2>/dev/null && (( waited < 900 )); do sleep 0.1; waited=$(( waited + 1 )); done # up to 90 s
  kill -KILL "$lp" 2>/dev/null; wait "$lp"; rc=$?; kill -KILL "$vp" 2>/dev/null
  local took=$(( $(date +%s) - t0 )) how
  # (one line may hold both: -o prints each match on a line of its own)
  how=$(grep -m1 -oE 'rank 2[^;]*stopped responding[^;]*|did not finish within [0-9]+ s' "$log" | head -1 | cut -c1-90)
  row "$name" "$([[ $rc != 0 && $took -le $(( NSTOP + 45 )) && -n "$how" ]] && echo ok || echo FAIL)" "exit $rc ${took} s after SIGSTOP of rank 2 of 3 (--timeout $NSTOP): ${how:-$(errline "$log")}"
}
# The memory NCCL takes, per rank, from the 4-rank hierarchical comm-check's log: what the three
# communicators' creation took (cudaMemGetInfo before and after) and the free memory once each
# connected (NCCL allocates its buffers in a communicator's first collective).
share_memory_row() {
  local log="$OUT/share-comm-4-hierarchical.log" took free
  took=$(grep -oE 'rank [0-9]+: the communicators took [0-9.]+ MiB' "$log" | sed -E 's/: the communicators took / /' | sort -k2,2n | paste -sd, -)
  free=$(grep -oE 'cuda:[0-9]+ has [0-9]+ MiB free once it connected' "$log" | grep -oE '[0-9]+ MiB' | sort -n | head -1)
  row "1-GPU nccl comm memory" "$([[ -n "$took" ]] && echo ok || echo FAIL)" \
      "${took:-no memory lines in $log}; least free once connected: ${free:-?} (4 ranks sharing the GPU: each rank's figure counts the others' allocations at the same moment)"
}
share_rows() { # REFJSON BATCH: the 1-GPU rows against the one-rank run REFJSON (EVAL0 at --batch BATCH)
  NREF="$1" NBATCH="$2"
  share_comm_row 2 flat
  share_comm_row 2 hierarchical
  share_comm_row 4 flat
  share_comm_row 4 hierarchical
  share_memory_row
  share_eval_row 2 flat
  share_eval_row 4 hierarchical
  if [[ -f "$NREF" ]]; then
    LOST_TAG=share CLUSTERPPL_NCCL_SHARE_GPU=1 lost_rank_row "1-GPU nccl lost rank of 3" 3 "$NREF" "$NBATCH" --device "$NDEV" --backend nccl
  else
    row "1-GPU nccl lost rank of 3" FAIL "no one-rank run to compare with ($NREF)"
  fi
  share_stopped_row
}
# The same rows on the CPU against the fake CUDA runtime and NCCL of tests/fakes (their directory in
# CPPL_GPU_CHECK_FAKES; one fake GPU): NCCL's collectives cross the ranks for real, the model runs
# on the CPU. Batch 2, so that the 48 windows of the self-test last long enough to kill or stop a
# rank mid-run: the one-rank run at that batch is the CPU lost-rank row's (lost-ref.json), Gloo's
# 2 ranks made here (no row); a 5 s --timeout for the stopped rank.
fake_share_rows() {
  export LD_LIBRARY_PATH="$FAKES${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CPPL_FAKE_CUDA_DEVICES=1
  NDEV=cpu NGLOO="$OUT/fake-gloo2.json" NSTOP=5 NWHERE="fake GPU 0"
  [[ -n "$NO_GLOO" ]] || "$AGENT" run --standalone --nproc-per-node 2 -- "${EVAL0[@]}" --batch 2 --device cpu --threads 1 --backend gloo \
    --sync-every-tokens 8192 --timeout 60 --json "$NGLOO" >"$OUT/fake-gloo2.log" 2>&1
  share_rows "$OUT/lost-ref.json" 2
}
# The tensor-parallel rows over NCCL on the same fakes (after fake_share_rows: its environment):
# the one-rank float32 run is the CPU's (eval cpu), the bfloat16 one made here (no row).
fake_tp_rows() {
  "$AGENT" eval "${EVAL[@]}" --device cpu --dtype bfloat16 --json "$OUT/fake-bf16.json" >"$OUT/fake-bf16.log" 2>&1
  tp_cuda_rows "$OUT/cpu.json" "$OUT/fake-bf16.json"
}
CPU_OK=0
if eval_row "eval cpu" "$OUT/cpu.json" "$OUT/cpu.log" --device cpu --threads "$(nproc)"; then
  CPU_OK=1
  row "eval cpu" ok "ppl $(jget "$OUT/cpu.json" ppl), $(jget "$OUT/cpu.json" tokens_per_second) tok/s"
fi

if [[ "$CPU_ONLY" == 1 ]]; then
  for r in "eval cuda fp32" "eval cuda bf16" "weights pinned = pageable" "eval cuda int8" "eval cuda int4" "eval cuda gqa" "default batch cuda" "gloo = nccl on cuda" "gloo 2 ranks on cuda = 1 rank" \
           "nccl ranks > GPUs refused" "comm-check nccl" "lost rank nccl" "speed bf16 vs eager"; do
    row "$r" skip "CPPL_GPU_CHECK_CPU_ONLY=1"
  done
  if [[ -z "$FAKES" ]]; then
    for r in "tensor-parallel 2 cuda fp32" "tensor-parallel 2 cuda bf16" "tensor-parallel 2x2 cuda = 2x1"; do
      row "$r" skip "CPPL_GPU_CHECK_CPU_ONLY=1 (CPPL_GPU_CHECK_FAKES=DIR runs it on the fakes)"
    done
    for r in "1-GPU nccl comm-check 2 flat" "1-GPU nccl comm-check 2 hier" "1-GPU nccl comm-check 4 flat" "1-GPU nccl comm-check 4 hier" \
             "1-GPU nccl comm memory" "1-GPU nccl eval 2 flat" "1-GPU nccl eval 4 hier" "1-GPU nccl lost rank of 3" "1-GPU nccl stopped rank"; do
      row "$r" skip "CPPL_GPU_CHECK_CPU_ONLY=1 (several NCCL ranks on one GPU: CPPL_GPU_CHECK_FAKES=DIR runs them on the fakes)"
    done
  fi
  # The default batch's path (sizing, result JSON) on the CPU, as if the GPU had 1.1 GiB free.
  [[ $CPU_OK == 1 ]] && default_batch_row "default batch, made-up GPU" "$OUT/autobatch.json" "$OUT/autobatch.log" "$OUT/cpu.json" \
    CLUSTERPPL_TEST_GPU_FREE_BYTES=$(( (1 << 30) + (110 << 20) )) -- --device cpu --threads "$(nproc)"
  # The same logic the GPU rows use, over Gloo: a one-rank communicator and a two-rank self-test.
  if "$AGENT" run --standalone --nproc-per-node 1 -- "${EVAL[@]}" --device cpu --backend gloo --sync-every-tokens 8192 --timeout 60 \
       --json "$OUT/gloo.json" >"$OUT/gloo.log" 2>&1; then
    same=$([[ $CPU_OK == 1 && "$(jget "$OUT/gloo.json" nll_sum_exact)" == "$(jget "$OUT/cpu.json" nll_sum_exact)" ]] && echo 1 || echo 0)
    row "gloo, 1 rank = eval cpu" "$([[ $same == 1 ]] && echo ok || echo FAIL)" \
        "nll_sum_exact $([[ $same == 1 ]] && echo identical || echo DIFFERS), $(jget "$OUT/gloo.json" rounds) rounds"
  else
    row "gloo, 1 rank = eval cpu" FAIL "$(errline "$OUT/gloo.log")"
  fi
  if "$AGENT" run --standalone --nproc-per-node 2 -- comm-check --backend gloo --words 1,7,65536 --timeout 60 >"$OUT/comm-gloo.log" 2>&1; then
    row "comm-check gloo, 2 ranks" ok "$(grep -c ': exact,' "$OUT/comm-gloo.log") sizes exact"
  else
    row "comm-check gloo, 2 ranks" FAIL "$(errline "$OUT/comm-gloo.log")"
  fi
  # The lost-rank row's own logic (placing the kill, the checks) over Gloo on the CPU.
  # (batch 2: 24 batches of the 48 windows, so that the kill lands mid-run; its own one-rank reference)
  if "$AGENT" eval "${EVAL0[@]}" --batch 2 --device cpu --threads 1 --json "$OUT/lost-ref.json" >"$OUT/lost-ref.log" 2>&1; then
    lost_rank_row "lost rank gloo, 3 ranks (cpu)" 3 "$OUT/lost-ref.json" 2 --device cpu --backend gloo --threads 1
  else
    row "lost rank gloo, 3 ranks (cpu)" FAIL "one-rank reference: $(errline "$OUT/lost-ref.log")"
  fi
  tp_cpu_row
  [[ -n "$FAKES" ]] && { fake_share_rows; fake_tp_rows; }
  finish
fi

if eval_row "eval cuda fp32" "$OUT/cuda32.json" "$OUT/cuda32.log" --device cuda --dtype float32 --tf32 off; then
  read -r d ok < <(rel "$(jget "$OUT/cpu.json" ppl)" "$(jget "$OUT/cuda32.json" ppl)" 1e-4)
  row "eval cuda fp32" "$([[ $CPU_OK == 1 && $ok == 1 ]] && echo ok || echo FAIL)" \
      "ppl $(jget "$OUT/cuda32.json" ppl), rel. diff to cpu $d (limit 1e-4), $(jget "$OUT/cuda32.json" tokens_per_second) tok/s"
fi
if eval_row "eval cuda bf16" "$OUT/cuda16.json" "$OUT/cuda16.log" --device cuda; then
  read -r d ok < <(rel "$(jget "$OUT/cuda32.json" ppl)" "$(jget "$OUT/cuda16.json" ppl)" 2e-2)
  row "eval cuda bf16" "$([[ "$(jget "$OUT/cuda16.json" dtype)" == bfloat16 && $ok == 1 ]] && echo ok || echo FAIL)" \
      "default dtype $(jget "$OUT/cuda16.json" dtype), ppl $(jget "$OUT/cuda16.json" ppl), rel. diff to fp32 $d (limit 2e-2), warm-up $(jget "$OUT/cuda16.json" warmup_seconds) s before the clock"
  # The weights' two ways to the GPU (docs/speed.md, "Loading"): the same bits.
  if eval_row "weights pinned = pageable" "$OUT/cuda16-pageable.json" "$OUT/cuda16-pageable.log" --device cuda --weight-upload pageable; then
    a=$(jget "$OUT/cuda16.json" nll_sum_exact); b=$(jget "$OUT/cuda16-pageable.json" nll_sum_exact)
    row "weights pinned = pageable" "$([[ -n "$a" && "$a" == "$b" && "$(jget "$OUT/cuda16.json" model weight_upload method)" == pinned ]] && echo ok || echo FAIL)" \
        "nll_sum_exact $a / $b; load $(jget "$OUT/cuda16.json" load_gb_per_second) GB/s pinned ($(jget "$OUT/cuda16.json" model weight_upload chunks) chunks), $(jget "$OUT/cuda16-pageable.json" load_gb_per_second) GB/s pageable"
  fi
fi

# Quantized weights on the GPU (issue 41): the CPU's LibTorch path (--gemm blas) multiplies by the
# same dequantized weights in float32, so the GPU's bfloat16 run is within bfloat16's rounding of it.
quant_row() { # SCHEME
  local q=$1 name="eval cuda $1"
  eval_row "$name" "$OUT/cpu-$q.json" "$OUT/cpu-$q.log" --device cpu --gemm blas --quantize "$q" --threads "$(nproc)" || return
  eval_row "$name" "$OUT/cuda-$q.json" "$OUT/cuda-$q.log" --device cuda --quantize "$q" || return
  read -r d ok < <(rel "$(jget "$OUT/cpu-$q.json" ppl)" "$(jget "$OUT/cuda-$q.json" ppl)" 2e-2)
  local held qbytes buf
  held=$(jget "$OUT/cuda-$q.json" model weight_bytes); qbytes=$(jget "$OUT/cuda-$q.json" quantization bytes)
  buf=$(jget "$OUT/cuda-$q.json" quantization dequant_buffer_bytes)
  row "$name" "$([[ $ok == 1 ]] && echo ok || echo FAIL)" \
      "ppl $(jget "$OUT/cuda-$q.json" ppl), rel. diff to cpu blas $d (limit 2e-2); weights held $held B: quantized $qbytes B ($(jget "$OUT/cuda-$q.json" quantization bits_per_weight) bits/weight) + one dequantized layer $buf B + the float rest; $(jget "$OUT/cuda-$q.json" tokens_per_second) tok/s"
}
quant_row int8
quant_row int4

# A grouped-query Llama (K/V heads = heads / 2): the GPU's fused attention shares K/V heads.
GQA="$OUT/gqa-model"
if "$PY" "$ROOT/tests/agent/reference/make_checkpoint.py" --arch llama --gqa --out "$GQA" >"$OUT/gqa-make.log" 2>&1 \
   && pyc "import array; array.array('I', ((i * 2654435761) % 97 for i in range(5000))).tofile(open('$OUT/gqa.u32', 'wb'))" >>"$OUT/gqa-make.log" 2>&1; then
  ok=1; p=()
  for d in cpu cuda; do
    if ! "$AGENT" eval --model "$GQA" --tokens "$OUT/gqa.u32" --context 64 --max-windows 64 --device "$d" --dtype float32 --tf32 off --quiet \
         --json "$OUT/gqa-$d.json" >"$OUT/gqa-$d.log" 2>&1; then
      row "eval cuda gqa" FAIL "$d: $(errline "$OUT/gqa-$d.log")"; ok=0; break
    fi
    p+=("$(jget "$OUT/gqa-$d.json" ppl)")
  done
  if (( ok )); then
    read -r d ok < <(rel "${p[0]}" "${p[1]}" 1e-4)
    row "eval cuda gqa" "$([[ $ok == 1 ]] && echo ok || echo FAIL)" "ppl ${p[1]} (kv heads $(jget "$GQA/config.json" num_key_value_heads) of $(jget "$GQA/config.json" num_attention_heads)), rel. diff to cpu $d (limit 1e-4)"
  fi
else
  row "eval cuda gqa" FAIL "making the model: $(errline "$OUT/gqa-make.log")"
fi

REF="$OUT/cuda32.json"; [[ -f "$REF" ]] || REF="$OUT/cpu.json"
default_batch_row "default batch cuda" "$OUT/autobatch.json" "$OUT/autobatch.log" "$REF" -- --device cuda

# 5. The reduction: gloo and nccl over the same ranks give the same exact sum.
N=$(( GPUS >= 2 ? 2 : 1 ))
if [[ -n "$NO_GLOO" ]] && (( N > 1 )); then
  row "gloo = nccl on cuda" skip "$NO_GLOO"
else
for b in gloo nccl; do
  "$AGENT" run --standalone --nproc-per-node "$N" -- "${EVAL[@]}" --device cuda --backend "$b" --sync-every-tokens 8192 --timeout 120 \
    --json "$OUT/$b.json" >"$OUT/$b.log" 2>&1 || echo "exit $?" >"$OUT/$b.failed"
done
if [[ -f "$OUT/gloo.failed" || -f "$OUT/nccl.failed" ]]; then
  row "gloo = nccl on cuda" FAIL "$( [[ -f "$OUT/nccl.failed" ]] && errline "$OUT/nccl.log" || errline "$OUT/gloo.log")"
else
  g=$(jget "$OUT/gloo.json" nll_sum_exact); n=$(jget "$OUT/nccl.json" nll_sum_exact)
  row "gloo = nccl on cuda" "$([[ -n "$g" && "$g" == "$n" && "$(jget "$OUT/nccl.json" backend)" == nccl ]] && echo ok || echo FAIL)" \
      "world size $N, $(jget "$OUT/nccl.json" rounds) rounds: nll_sum_exact $([[ "$g" == "$n" ]] && echo identical || echo "DIFFERS ($g vs $n)")"
fi
fi
# Two ranks over Gloo on cuda (one GPU: both share it; Gloo allows that, NCCL does not) against the
# one-rank run: a real reduction of sums the GPU computed, even where NCCL can only run one rank.
if [[ -n "$NO_GLOO" ]]; then
  row "gloo 2 ranks on cuda = 1 rank" skip "$NO_GLOO"
elif [[ ! -f "$OUT/cuda16.json" ]]; then
  row "gloo 2 ranks on cuda = 1 rank" FAIL "no one-rank cuda run to compare with (eval cuda bf16 failed)"
elif "$AGENT" run --standalone --nproc-per-node 2 -- "${EVAL[@]}" --device cuda --backend gloo --sync-every-tokens 8192 --timeout 120 \
       --json "$OUT/gloo2.json" >"$OUT/gloo2.log" 2>&1; then
  mine=$(jget "$OUT/gloo2.json" nll_sum_exact); theirs=$(jget "$OUT/cuda16.json" nll_sum_exact)
  row "gloo 2 ranks on cuda = 1 rank" "$([[ -n "$mine" && "$mine" == "$theirs" ]] && echo ok || echo FAIL)" \
      "$(jget "$OUT/gloo2.json" world_size) ranks on $GPUS GPU(s), $(jget "$OUT/gloo2.json" rounds) rounds: nll_sum_exact $([[ -n "$mine" && "$mine" == "$theirs" ]] && echo identical || echo "DIFFERS ($mine vs $theirs)")"
else
  row "gloo 2 ranks on cuda = 1 rank" FAIL "$(errline "$OUT/gloo2.log")"
fi
# More NCCL ranks than GPUs: refused before NCCL starts (NCCL itself would fail on a duplicate GPU).
if "$AGENT" run --standalone --nproc-per-node "$(( GPUS + 1 ))" -- comm-check --backend nccl --timeout 60 >"$OUT/nccl-over.log" 2>&1; then
  row "nccl ranks > GPUs refused" FAIL "$(( GPUS + 1 )) NCCL ranks on $GPUS GPU(s) ran"
elif grep -q 'NCCL needs a GPU of its own' "$OUT/nccl-over.log"; then
  row "nccl ranks > GPUs refused" ok "$(( GPUS + 1 )) ranks on $GPUS GPU(s): $(grep -m1 -o 'NCCL needs a GPU of its own[^;]*' "$OUT/nccl-over.log")"
else
  row "nccl ranks > GPUs refused" FAIL "refused, but not for the GPU count: $(errline "$OUT/nccl-over.log")"
fi

# 6. The collective self-test: every GPU a rank (NCCL allows one rank per GPU).
for topo in flat hierarchical; do
  groups=(); [[ $topo == hierarchical ]] && groups=(--groups size:1) # every rank its own group: reduce, leaders, broadcast
  if "$AGENT" run --standalone --nproc-per-node "$GPUS" "${groups[@]}" -- comm-check --backend nccl --topology "$topo" --timeout 120 \
       >"$OUT/comm-$topo.log" 2>&1; then
    row "comm-check nccl $topo" ok "world size $GPUS, $(grep -c ': exact,' "$OUT/comm-$topo.log") sizes exact; $(grep '1048577 words' "$OUT/comm-$topo.log" | sed 's/.*exact, //')"
  else
    row "comm-check nccl $topo" FAIL "$(errline "$OUT/comm-$topo.log")"
  fi
done

# 7. A lost rank over NCCL: the survivors shrink (or rebuild) their communicators and finish with
#    one rank's bits (the one-rank cuda run above, same batch and dtype).
if (( GPUS >= 2 )); then
  if [[ -f "$OUT/cuda16.json" ]]; then
    lost_rank_row "lost rank nccl" "$(( GPUS >= 3 ? 3 : 2 ))" "$OUT/cuda16.json" 8 --device cuda --backend nccl
  else
    row "lost rank nccl" FAIL "no one-rank cuda run to compare with (eval cuda bf16 failed)"
  fi
else
  row "lost rank nccl" skip "one GPU: NCCL needs a GPU per rank, and a lost rank needs two ranks"
fi

# 7b. Several NCCL ranks on ONE GPU (share_rows, above).
share_rows "$OUT/cuda16.json" 8

# 8. Tensor parallelism: on the CPU over Gloo (as in the self-test), and on the GPU over NCCL.
tp_cpu_row
tp_cuda_rows "$OUT/cuda32.json" "$OUT/cuda16.json"

# 9. Speed at bfloat16: the agent and a PyTorch eager loop on one synthetic ~200M-parameter Llama.
BENCH="$OUT/bench-model"
step=bench-make
"$PY" "$ROOT/tests/agent/reference/make_checkpoint.py" --arch llama --out "$BENCH" --dtype BF16 --vocab 32000 --hidden 1024 \
    --intermediate 2816 --layers 12 --heads 16 --max-positions 1024 >"$OUT/bench-make.log" 2>&1 \
  && pyc "import array, random; r = random.Random(0); array.array('I', (r.randrange(32000) for _ in range(1 << 20))).tofile(open('$OUT/bench.u32', 'wb'))" \
       >>"$OUT/bench-make.log" 2>&1 \
  && step=bench && "$AGENT" eval --model "$BENCH" --tokens "$OUT/bench.u32" --device cuda --context 1024 --batch 8 --quiet \
       --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1 \
  && step=eager && "$PY" "$ROOT/scripts/gpu_eager_bench.py" --model "$BENCH" --context 1024 --batch 8 --tokens $((1 << 20)) \
       --agent-json "$OUT/bench.json" >"$OUT/eager.log" 2>&1 \
  && step=bench-auto && "$AGENT" eval --model "$BENCH" --tokens "$OUT/bench.u32" --device cuda --context 1024 --quiet \
       --json "$OUT/bench-auto.json" >"$OUT/bench-auto.log" 2>&1 \
  && step=ok
if [[ $step == ok ]]; then
  row "speed bf16 vs eager" ok "$(tail -1 "$OUT/eager.log")"
  row "speed bf16 default batch" ok "batch $(jget "$OUT/bench-auto.json" batch) ($(jget "$OUT/bench-auto.json" batch_from limited_by)): $(jget "$OUT/bench-auto.json" tokens_per_second) tok/s"
else
  row "speed bf16 vs eager" FAIL "$step: $(errline "$OUT/$step.log")"
fi
finish
