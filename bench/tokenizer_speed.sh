#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Side by side, in one run, one thread each: ClusterPPL's tokenizer (bench_tokenizer, Release build)
# and the npm package gpt-tokenizer (GPT-2 = r50k_base, pinned as in the tests) on the same text,
# plus a check that both give the same ids.
#
#   bench/tokenizer_speed.sh [BUILD_DIR] [TEXT]
# Defaults: build/default, ../shared/data/wikitext-2-raw/wiki.test.raw, the GPT-2 tokenizer.json.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build/default}"
TEXT="${2:-$ROOT/../shared/data/wikitext-2-raw/wiki.test.raw}"
TOKENIZER="$ROOT/../shared/data/tokenizers/gpt2"
NPM_PREFIX="$BUILD/npm-tokenizer"
GPT_TOKENIZER_VERSION=3.4.0 # keep in step with tests/agent/tst_tokenizer_reference.cpp
WORK="$BUILD/bench-work"
mkdir -p "$WORK"

if ! grep -qs "\"version\": \"$GPT_TOKENIZER_VERSION\"" "$NPM_PREFIX/node_modules/gpt-tokenizer/package.json"; then
  npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --loglevel=error "gpt-tokenizer@$GPT_TOKENIZER_VERSION" >/dev/null
fi

ours=$("$BUILD/bench/bench_tokenizer" "$TOKENIZER" "$TEXT" "$WORK/ours.u32")
best_npm=""
for rep in 1 2 3; do # node's JIT warms up inside one run; best of three runs
  line=$(node "$ROOT/tests/agent/npm/encode_r50k.js" "$NPM_PREFIX" "$TEXT" "$WORK/npm.u32")
  mbs=$(awk '{for (i = 1; i < NF; ++i) if ($i == "MB/s") print $(i + 1)}' <<<"$line")
  if [[ -z "$best_npm" ]] || awk -v a="$mbs" -v b="$best_npm" 'BEGIN { exit !(a > b) }'; then best_npm=$mbs; fi
done
same=$(cmp -s "$WORK/ours.u32" "$WORK/npm.u32" && echo identical || echo DIFFERENT)

python3 - "$ours" "$best_npm" "$same" "$TEXT" <<'PY'
import json, sys
o = json.loads(sys.argv[1]); npm = float(sys.argv[2])
print(f"text: {sys.argv[4]} ({o['bytes']} bytes), GPT-2 tokenizer, one thread, MB = 10^6 bytes")
print(f"{'implementation':<40} {'MB/s':>8}")
print(f"{'clusterppl (fresh tokenizer, cold cache)':<40} {o['cold_mb_per_s']:>8.2f}")
print(f"{'clusterppl (word cache filled)':<40} {o['warm_mb_per_s']:>8.2f}")
print(f"{'npm gpt-tokenizer (best of 3 runs)':<40} {npm:>8.2f}")
print(f"ids: {o['ids']}, {sys.argv[3]} to gpt-tokenizer's; cold speed-up over npm: {o['cold_mb_per_s'] / npm:.1f}x")
PY
