# SPDX-License-Identifier: MIT
# Shared by demo.sh and test.sh: install what is missing, configure once, build incrementally.
# CLUSTERPPL_PRESET (default: "default", Release) picks the CMake preset; CLUSTERPPL_SKIP_DEPS=1
# skips the package check (when you manage dependencies yourself); CLUSTERPPL_BUILD_DIR with
# CLUSTERPPL_NO_BUILD=1 runs on an existing build tree; CLUSTERPPL_CMAKE_ARGS adds arguments to the
# first configure (CI: -DCLUSTERPPL_WERROR=ON).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PRESET="${CLUSTERPPL_PRESET:-default}"
BUILD_DIR="${CLUSTERPPL_BUILD_DIR:-$ROOT/build/$PRESET}"

cppl_prepare() {
  "$ROOT/scripts/install-deps.sh"
  [[ "${CLUSTERPPL_NO_BUILD:-0}" == 1 ]] && return 0 # the e2e test runs the scripts on its own build tree
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    echo "== configuring ($PRESET) ==" >&2
    # shellcheck disable=SC2086 # CLUSTERPPL_CMAKE_ARGS is a list of arguments
    cmake --preset "$PRESET" -S "$ROOT" ${CLUSTERPPL_CMAKE_ARGS:-} >/dev/null
  fi
  echo "== building ($PRESET) ==" >&2
  cmake --build "$BUILD_DIR"
}
