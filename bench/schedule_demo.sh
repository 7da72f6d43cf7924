#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 16's real-model check: the demo's 4-rank evaluation of the embedded default (byte Llama on
# held-out Tiny Shakespeare, llama.cpp windows of 256, batch 8, 1 thread per rank, groups of 2,
# hierarchical, Gloo, threshold 8192) with --schedule static and dynamic, alternately, N runs each.
# Prints per run: schedule, seconds (slowest rank's wall), tokens/s, mean and max comm share over
# the ranks, rounds, nll_sum_exact; and checks that every run has the one-rank bits.
# Usage: bench/schedule_demo.sh [BUILD_DIR] [RUNS]   (run it under the bench lock: docs/communication.md)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build/default}"
RUNS="${2:-3}"
AGENT="$BUILD/agent/clusterppl-agent"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
EVAL=(eval --model "$ROOT/resources/models/shakespeare-byte-llama" --text "$ROOT/resources/data/tinyshakespeare-heldout.txt"
      --tokenizer bytes --protocol llama.cpp --context 256 --batch 8 --threads 1 --blas-threads 1)
"$AGENT" "${EVAL[@]}" --json "$OUT/one.json" 2>/dev/null
for ((i = 1; i <= RUNS; ++i)); do
  for schedule in static dynamic; do
    "$AGENT" run --standalone --nproc-per-node 4 --groups size:2 -- "${EVAL[@]}" --topology hierarchical \
      --sync-every-tokens 8192 --schedule "$schedule" --json "$OUT/$schedule.json" 2>/dev/null
    python3 - "$OUT/$schedule.json" "$OUT/one.json" <<'PY'
import json, sys
j, one = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
shares = [r["comm_share"] for r in j["ranks"]]
same = "same bits" if j["nll_sum_exact"] == one["nll_sum_exact"] else "MISMATCH"
print(f'{j["schedule"]:8s} {j["seconds"]:6.2f} s  {j["tokens_per_second"]:7.0f} tok/s  comm share mean {100*sum(shares)/len(shares):5.2f}% '
      f'max {100*max(shares):5.2f}%  rounds {j["rounds"]}  {same}')
if same != "same bits":
    sys.exit(1)
PY
  done
done
