#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job on the embedded default. Installs what is missing and builds (Release) if needed.
#
# Foundation release: the agent cannot load a model yet (LibTorch evaluation is the next
# milestone), so this demo runs what exists today, on the embedded default profile:
#   1. validates the profile: 4 local ranks in 2 groups;
#   2. plans the held-out Tiny Shakespeare text as those 4 ranks will evaluate it: the llama.cpp
#      windows, balanced shards (every window exactly once) and the sync rounds all ranks share.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cppl_prepare
PROFILE="$ROOT/resources/profiles/local-default.json"
TEXT="$ROOT/resources/data/tinyshakespeare-heldout.txt"

cat <<'TXT'

== ClusterPPL demo (foundation release) ==
What runs: profile validation, window planning, sharding and sync rounds for the embedded default.
Not yet: model evaluation and multi-rank runs (the agent's eval command arrives next); the numbers
below are the exact plan those runs will follow, not a perplexity.

TXT
echo "-- 1/2  clusterppl-cli profile check resources/profiles/local-default.json"
"$BUILD_DIR/gui/clusterppl-cli" profile check "$PROFILE"
echo
echo "-- 2/2  clusterppl-agent plan: llama.cpp protocol, context 256, 4 ranks, sync every 8192 tokens"
"$BUILD_DIR/agent/clusterppl-agent" plan --text "$TEXT" --tokenizer bytes --protocol llama.cpp \
  --context 256 --ranks 4 --batch 8 --sync-every-tokens 8192 --json "$BUILD_DIR/demo-plan.json"
echo
echo "Plan written to $BUILD_DIR/demo-plan.json"
