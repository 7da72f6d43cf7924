#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds (Release) if needed, and runs the whole test suite.
# Extra arguments go to ctest, e.g.  scripts/test.sh -L unit   or   scripts/test.sh -R exact_sum
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cppl_prepare
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
