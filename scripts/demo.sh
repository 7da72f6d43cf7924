#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job on the embedded default: a local 4-rank evaluation of the embedded byte-level Llama on
# held-out Tiny Shakespeare, checked bit for bit against one rank. Installs what is missing and builds
# (Release) if needed. Everything it reads ships in resources/.
#
# Today the ranks are local processes that each evaluate a balanced shard (`eval --shard R/4`) and
# are merged exactly from their result files (`merge`). Live collectives (Gloo/NCCL), telemetry, the
# SSH launcher and the dashboard are the next milestones (docs/ARCHITECTURE.md, "Status").
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cppl_prepare
PROFILE="$ROOT/resources/profiles/local-default.json"
MODEL="$ROOT/resources/models/shakespeare-byte-llama"
TEXT="$ROOT/resources/data/tinyshakespeare-heldout.txt"
AGENT="$BUILD_DIR/agent/clusterppl-agent"
OUT="$BUILD_DIR/demo"
RANKS=4
mkdir -p "$OUT"
# Same per-rank settings for the one-rank reference and every rank: bit-identity needs them
# (docs/models.md, "Determinism"). One BLAS thread per rank; the 4 ranks share this machine's cores.
COMMON=(eval --model "$MODEL" --text "$TEXT" --tokenizer bytes --protocol llama.cpp --context 256
        --batch 8 --threads 1 --blas-threads 1)

echo
echo "== ClusterPPL demo: embedded default (${RANKS} local ranks, 2 groups) =="
echo
echo "-- 1/4  profile"
"$BUILD_DIR/gui/clusterppl-cli" profile check "$PROFILE"
echo
echo "-- 2/4  plan: llama.cpp windows of 256 bytes, sharded over ${RANKS} ranks"
"$AGENT" plan --text "$TEXT" --tokenizer bytes --protocol llama.cpp --context 256 --ranks "$RANKS" \
  --batch 8 --sync-every-tokens 8192 --json "$OUT/plan.json" | sed -n '1,6p'
echo
echo "-- 3/4  one rank (the reference)"
"$AGENT" "${COMMON[@]}" --json "$OUT/one-rank.json" 2> >(grep -E '^(BLAS|WARNING|model)' >&2)
echo
echo "-- 4/4  ${RANKS} ranks in parallel, each on its shard, merged exactly"
pids=()
for ((r = 0; r < RANKS; r++)); do
  "$AGENT" "${COMMON[@]}" --shard "$r/$RANKS" --quiet --json "$OUT/rank-$r.json" > "$OUT/rank-$r.log" 2>&1 &
  pids+=($!)
done
for r in "${!pids[@]}"; do
  if ! wait "${pids[$r]}"; then
    echo "rank $r failed:" >&2
    cat "$OUT/rank-$r.log" >&2
    exit 1
  fi
done
"$AGENT" merge "$OUT"/rank-*.json --json "$OUT/merged.json"
one=$(sed -n 's/.*"nll_sum_exact": "\(.*\)".*/\1/p' "$OUT/one-rank.json")
merged=$(sed -n 's/.*"nll_sum_exact": "\(.*\)".*/\1/p' "$OUT/merged.json")
echo
if [[ -n "$one" && "$one" == "$merged" ]]; then
  echo "bit-identical: the ${RANKS}-rank sum equals the one-rank sum exactly (nll_sum_exact)"
else
  echo "MISMATCH: one rank $one vs ${RANKS} ranks $merged" >&2
  exit 1
fi
echo "results: $OUT/{one-rank,merged,rank-*}.json"
