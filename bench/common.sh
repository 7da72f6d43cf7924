#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What the bench scripts share (sourced, not run): the paths, the build directory argument, token
# files, random checkpoints made once, and the line saying how loaded the host was.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
#   bench_setup "${1:-}"      # BUILD_DIR (default build/default): BUILD, WORK, AGENT
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=/usr/bin/python3 # Debian's, with python3-torch and NumPy
REF="$ROOT/tests/agent/reference"

# bench_setup [BUILD_DIR]: BUILD, WORK (BUILD/bench-work, created) and AGENT; refuses a build without the agent.
bench_setup() {
  BUILD="${1:-$ROOT/build/default}"
  [[ -n "$BUILD" ]] || BUILD="$ROOT/build/default"
  WORK="$BUILD/bench-work"
  AGENT="$BUILD/agent/clusterppl-agent"
  if [[ ! -x "$AGENT" ]]; then
    echo "error: $AGENT is not built; build the agent first (cmake --build $BUILD --target clusterppl-agent clusterppl-agent-torch)" >&2
    exit 2
  fi
  mkdir -p "$WORK"
}

# bench_tokens FILE COUNT VOCAB: COUNT uniform random ids below VOCAB (seed 0), little-endian uint32.
bench_tokens() {
  "$PY" -c 'import numpy as np, sys; np.random.seed(0); np.random.randint(0, int(sys.argv[3]), int(sys.argv[2])).astype("<u4").tofile(sys.argv[1])' "$1" "$2" "$3"
}

# bench_checkpoint DIR MAKE_CHECKPOINT_FLAGS...: a random checkpoint (make_checkpoint.py), made once.
bench_checkpoint() {
  local dir="$1"
  shift
  [[ -f "$dir/model.safetensors" || -f "$dir/model.safetensors.index.json" ]] || "$PY" "$REF/make_checkpoint.py" --out "$dir" "$@" >/dev/null
}

# bench_load: the load averages (uptime's), for the header and between repeats.
bench_load() { uptime | sed 's/.*load/load/'; }

# bench_cpu: "N CPUs (model name)".
bench_cpu() { echo "$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"; }
