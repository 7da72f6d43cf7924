#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job on the embedded default: a local 4-rank evaluation of the embedded byte-level Llama on
# held-out Tiny Shakespeare, checked bit for bit against one rank. Installs what is missing and builds
# (Release) if needed. Everything it reads ships in resources/.
#
# The 4 ranks are real agent processes started by `clusterppl-cli run` from the embedded default
# profile: pre-flight, TCPStore rendezvous, Gloo collectives, 2 node groups of 2 ranks, hierarchical
# aggregation (reduce in each group, all-reduce among leaders, broadcast back) in planned sync
# rounds, live telemetry merged exactly in the CLI. The dashboard is the next milestone
# (docs/ARCHITECTURE.md, "Status").
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
echo "-- 4/4  the embedded default profile: ${RANKS} ranks in 2 node groups (clusterppl-cli run, local launcher)"
"$BUILD_DIR/gui/clusterppl-cli" run --profile "$PROFILE" --agent "$AGENT" --json "$OUT/distributed.json" \
  2> >(grep -E '^(clusterppl-cli|distributed|\[round|\[live|\[rank)' >&2)
one=$(sed -n 's/.*"nll_sum_exact": "\(.*\)".*/\1/p' "$OUT/one-rank.json")
dist=$(sed -n 's/.*"nll_sum_exact": "\(.*\)".*/\1/p' "$OUT/distributed.json")
echo
if [[ -n "$one" && "$one" == "$dist" ]]; then
  echo "bit-identical: the ${RANKS}-rank sum equals the one-rank sum exactly (nll_sum_exact)"
else
  echo "MISMATCH: one rank $one vs ${RANKS} ranks $dist" >&2
  exit 1
fi
echo "per rank (tokens, compute s, wait s, transfer s, comm share):"
/usr/bin/env python3 - "$OUT/distributed.json" <<'PY' 2>/dev/null || true
import json, sys
j = json.load(open(sys.argv[1]))
for r in j["ranks"]:
    print(f"  rank {r['rank']} group {r['group']}: {r['tokens']:6d} tokens  {r['compute_seconds']:6.2f}  {r['wait_seconds']:6.3f}  {r['transfer_seconds']:6.4f}  {100*r['comm_share']:5.2f}%")
PY
echo "results: $OUT/{one-rank,distributed}.json"
