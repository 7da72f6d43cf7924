#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package ClusterPPL needs to build, test and run. Idempotent: packages
# already present are skipped, so a second run costs a dpkg query and nothing else.
# Works as root or through sudo. Set CLUSTERPPL_SKIP_DEPS=1 to skip it entirely (packagers, CI images).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  # shared/: JSON
  nlohmann-json3-dev
  # gui/: Qt 6 (core, widgets, charts, SQLite, SVG), test runner, virtual display
  qt6-base-dev qt6-charts-dev libqt6sql6-sqlite qt6-svg-dev xvfb
  # agent/: LibTorch, Gloo headers for c10d, a fast BLAS (Debian's default netlib BLAS is ~35x slower)
  libtorch-dev libgloo-dev libopenblas0-pthread
  # test references: Debian's PyTorch for /usr/bin/python3 (independent logits and perplexities)
  python3-torch python3-numpy
  # tokenizers: Unicode regex (PCRE2); Node.js runs the pinned npm tokenizers the tests compare with
  # (npm itself: Debian's npm package, or the one bundled with NodeSource's nodejs)
  libpcre2-dev nodejs
  # SentencePiece tokenizer.model: the library behind the agent's shim, spm_train/spm_encode for its tests
  libsentencepiece-dev sentencepiece
  # telemetry and launching (clang: libFuzzer for scripts/fuzz-smoke.sh)
  libzmq3-dev cppzmq-dev libsodium-dev libssh-dev openssh-server openssh-client clang
)

[[ "${CLUSTERPPL_SKIP_DEPS:-0}" == 1 ]] && exit 0

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# npm (tokenizer reference tests): NodeSource's nodejs bundles it and conflicts with Debian's npm
# package, so it is installed only when no npm is on PATH.
if ! command -v npm >/dev/null 2>&1 && ! dpkg-query -W -f='${Status}' npm 2>/dev/null | grep -q "install ok installed"; then
  missing+=(npm)
fi
if ((${#missing[@]} == 0)); then
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  echo "install-deps: missing packages (${missing[*]}) and neither root nor sudo is available." >&2
  echo "install-deps: ask an administrator to run: apt-get install ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${#missing[@]} package(s): ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done" >&2
