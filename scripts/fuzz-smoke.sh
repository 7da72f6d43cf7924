#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CI smoke of every libFuzzer target (docs/fuzzing.md): SECONDS each (default 20; eleven targets, as
# many at once as there are cores, so about 120 s on 2), seeded from the repository's real files. A 5 s per-input limit keeps a loaded CI
# machine from reporting false hangs; the long runs (scripts/fuzz.sh) hold inputs to 1 s.
#   scripts/fuzz-smoke.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz-smoke: SECONDS must be a whole number >= 1, got \"$seconds\"" >&2; exit 2; }
exec scripts/fuzz.sh --seconds "$seconds" --timeout 5
