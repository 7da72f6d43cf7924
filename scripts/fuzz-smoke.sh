#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Short libFuzzer run of the telemetry decoder (CI smoke). Builds a clang-only tree in build/fuzz
# (no Qt GUI, no agent), seeds the corpus with valid messages, runs for SECONDS (default 30).
#   scripts/fuzz-smoke.sh [SECONDS]
# Long sessions: docs/telemetry.md ("Fuzzing").
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
build=build/fuzz
command -v clang++ >/dev/null || { echo "fuzz-smoke: clang++ is missing (apt-get install clang)" >&2; exit 1; }
if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCLUSTERPPL_BUILD_FUZZ=ON -DCLUSTERPPL_BUILD_GUI=OFF -DCLUSTERPPL_BUILD_AGENT=OFF -DCLUSTERPPL_BUILD_BENCH=OFF >/dev/null
fi
ninja -C "$build" fuzz_telemetry_decode
corpus=$build/corpus/telemetry_decode
mkdir -p "$corpus"
# Seeds: one message of each kind (valid), so mutations start from the real schema.
seed() { printf '%s' "$2" >"$corpus/seed-$1.json"; }
head='"v":1,"run":"r1","rank":1,"host":"node01","group":0,"local_rank":1,"world_size":4,"seq":7,"t":1717171717.5,"dropped_total":0'
xs="xs1:$(printf '0%.0s' {1..112})"
seed hello "{$head,\"kind\":\"hello\",\"phase\":\"loading\"}"
seed progress "{$head,\"kind\":\"progress\",\"tokens_scored_total\":10,\"tokens_per_second\":2.5,\"windows_done\":1,\"windows_total\":2,\"compute_seconds_total\":1.0,\"comm_wait_seconds_total\":0.0,\"comm_transfer_seconds_total\":0.0,\"nll_exact\":\"$xs\",\"nll_sq_exact\":\"$xs\",\"rss_bytes\":1}"
seed sync "{$head,\"kind\":\"sync\",\"round\":1,\"rounds_total\":3,\"wait_seconds\":0.1,\"transfer_seconds\":0.01}"
seed log "{$head,\"kind\":\"log\",\"level\":\"info\",\"message\":\"hi \\u00e9\"}"
seed result "{$head,\"kind\":\"result\",\"result_json\":\"{\\\"ppl\\\":1.5}\"}"
seed error "{$head,\"kind\":\"error\",\"message\":\"boom\",\"exit_code\":4}"
seed bye "{$head,\"kind\":\"bye\",\"exit_code\":0}"
mkdir -p "$build/fuzz-artifacts"
"$build/tests/fuzz/fuzz_telemetry_decode" -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/fuzz-artifacts/" -print_final_stats=1 "$corpus"
