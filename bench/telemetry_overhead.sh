#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Evaluation time with telemetry off and to an unreachable collector, side by side
# in alternating order (the machine is shared and noisy): the embedded model, 1 thread.
#   bench/telemetry_overhead.sh [BUILD_DIR] [REPEATS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build/default}"
REPEATS="${2:-3}"
AGENT="$BUILD/agent/clusterppl-agent"
EVAL=(eval --model "$ROOT/resources/models/shakespeare-byte-llama" --text "$ROOT/resources/data/tinyshakespeare-heldout.txt"
      --tokenizer bytes --protocol llama.cpp --context 256 --batch 8 --threads 1 --blas-threads 1 --max-windows 200 --quiet)
DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
time_of() { # prints "wall eval": the process's wall time and the evaluation's own seconds
  local s e
  s=$(date +%s.%N)
  "$AGENT" "${EVAL[@]}" --json "$OUT" "$@" >/dev/null
  e=$(date +%s.%N)
  python3 -c "import json; print(f'{$e-$s:.2f} {json.load(open(\"$OUT\"))[\"seconds\"]:.2f}')"
}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
echo "telemetry overhead: $(nproc) cores, 1 thread, 200 windows of 256 tokens; seconds per run (wall / evaluation)"
echo "(to a live collector: clusterppl-cli run prints the telemetry totals; bench_collector measures ingest)"
printf '%-6s %-14s %-16s\n' run off "dead collector"
for ((i = 1; i <= REPEATS; i++)); do
  off=$(time_of)
  dead=$(time_of --telemetry "tcp://127.0.0.1:$DEAD" --run-id bench)
  printf '%-6s %-14s %-16s\n' "$i" "${off/ / / }" "${dead/ / / }"
done
echo "The dead collector's extra wall time is the publisher's close linger (at most 1 s) at exit; the"
echo "evaluation itself does not wait."
