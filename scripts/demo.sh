#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job on the embedded default: a local 4-rank evaluation of the embedded byte-level Llama on
# held-out Tiny Shakespeare, checked bit for bit against one rank. Installs what is missing and builds
# (Release) if needed. Everything it reads ships in resources/. Both runs go through
# `clusterppl-cli run` into the run history, so the dashboard and the reports compare the 4 ranks
# with their one-rank baseline.
#
# The 4 ranks are real agent processes started by `clusterppl-cli run` from the embedded default
# profile: pre-flight, TCPStore rendezvous, Gloo collectives, 2 node groups of 2 ranks, hierarchical
# aggregation (reduce in each group, all-reduce among leaders, broadcast back) in sync rounds, the
# dynamic schedule (ranks claim global batches from a counter on the store as they go), live
# telemetry merged exactly in the CLI, then the dashboard and the reports.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cppl_prepare
PROFILE="$ROOT/resources/profiles/local-default.json"
TEXT="$ROOT/resources/data/tinyshakespeare-heldout.txt"
AGENT="$BUILD_DIR/agent/clusterppl-agent"
OUT="$BUILD_DIR/demo"
RANKS=4
RUN_ID="demo-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
CLI="$BUILD_DIR/gui/clusterppl-cli"

echo
echo "== ClusterPPL demo: embedded default (${RANKS} local ranks, 2 groups) =="
echo
echo "-- 1/6  profile"
"$CLI" profile check "$PROFILE"
echo
echo "-- 2/6  plan: llama.cpp windows of 256 bytes over ${RANKS} ranks (static shards shown; the run claims global batches as ranks go)"
"$AGENT" plan --text "$TEXT" --tokenizer bytes --protocol llama.cpp --context 256 --ranks "$RANKS" \
  --batch 8 --sync-every-tokens 8192 --json "$OUT/plan.json" | sed -n '1,6p'
echo
echo "-- 3/6  one rank (the reference): the same profile on one slot (hostfile import --like), stored as the baseline"
printf 'localhost slots=1\n' >"$OUT/one-rank.hosts"
"$CLI" hostfile import "$OUT/one-rank.hosts" --launcher local --like "$PROFILE" -o "$OUT/one-rank-profile.json" 2>/dev/null
"$CLI" run --profile "$OUT/one-rank-profile.json" --agent "$AGENT" --run-id "$RUN_ID-1rank" --json "$OUT/one-rank.json" \
  2> >(grep -E '^(clusterppl-cli|\[rank)' >&2)
echo
echo "-- 4/6  the embedded default profile: ${RANKS} ranks in 2 node groups (clusterppl-cli run, local launcher)"
"$CLI" run --profile "$PROFILE" --agent "$AGENT" --run-id "$RUN_ID" --json "$OUT/distributed.json" \
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
# The schedule the ranks ran (the profile's default, dynamic: global batches claimed as ranks go).
echo "schedule: $(sed -n 's/^ *"schedule": "\([a-z]*\)".*/\1/p' "$OUT/distributed.json")"
/usr/bin/env python3 - "$OUT/distributed.json" <<'PY' 2>/dev/null || true
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{j.get('batch_count')} global batches of {j.get('batch')} windows, {j.get('rounds')} sync rounds")
print("per rank (tokens, compute s, wait s, transfer s, comm share, global batches):")
for r in j["ranks"]:
    print(f"  rank {r['rank']} group {r['group']}: {r['tokens']:6d} tokens  {r['compute_seconds']:6.2f}  {r['wait_seconds']:6.3f}  {r['transfer_seconds']:6.4f}  {100*r['comm_share']:5.2f}%  {r.get('batches', '')}")
PY
echo "results: $OUT/{one-rank,distributed}.json"
echo
APP="$BUILD_DIR/gui/app/clusterppl"
if [[ "${CLUSTERPPL_DEMO_NO_GUI:-0}" == 1 || ! -x "$APP" ]]; then
  echo "-- 5/6  dashboard: skipped (${APP##*/} not built or CLUSTERPPL_DEMO_NO_GUI=1)"
elif [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" && -z "${CI:-}" ]]; then
  echo "-- 5/6  dashboard: opening it on the embedded default and starting the run (close the window to end)"
  "$APP" --profile "$PROFILE" --agent "$AGENT" --run
else
  echo "-- 5/6  dashboard, offscreen (no display): the same run, its pages saved mid-run and finished"
  "$APP" --profile "$PROFILE" --agent "$AGENT" --screenshot "$OUT/dashboard" --run --run-timeout 600 \
    2> >(grep -v -e propagateSizeHints -e XDG_RUNTIME_DIR >&2) | sed 's/^/  page: /'
fi
echo
echo "-- 6/6  reports of run $RUN_ID from the run history (clusterppl-cli report)"
for format in html pdf; do
  "$CLI" report "$RUN_ID" --format "$format" -o "$OUT/report.$format" >/dev/null 2> >(grep -v XDG_RUNTIME_DIR >&2)
done
echo "report: $OUT/report.html"
echo "report: $OUT/report.pdf"
