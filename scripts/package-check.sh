#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Debian packages and checks them the way a user meets them (docs/packaging.md):
#   1. the desktop file and AppStream metainfo validate; a relocated `cmake --install` prefix works;
#   2. cpack builds clusterppl-agent_*.deb and clusterppl_*.deb; their Depends and files are as
#      expected (no Qt in the agent's); lintian reports no errors;
#   3. both are installed with apt (dependencies resolve), then from /tmp: --version/--help, the man
#      pages and completions agree with --help, a 2-rank standalone evaluation of the installed demo
#      model, a clusterppl-cli run of the installed default profile, the dashboard offscreen on it;
#   4. both are purged: nothing of them is left on the system.
# Needs root or sudo (it installs packages). Usage: scripts/package-check.sh [BUILD_DIR]
# BUILD_DIR (default build/default, what scripts/test.sh builds) is configured and built if needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$root/build/default}")
start=$SECONDS
step() { echo "== package-check: $1 (at $((SECONDS - start)) s)" >&2; }
fail() { echo "package-check: FAIL: $*" >&2; exit 1; }

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || fail "installing the packages needs root or sudo; run it as root"
  sudo=(sudo)
fi

step "tools (lintian, desktop-file-utils, appstream, dpkg-dev)"
need=()
for t in lintian:lintian desktop-file-validate:desktop-file-utils appstreamcli:appstream dpkg-shlibdeps:dpkg-dev; do
  command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
if ((${#need[@]})); then
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || fail "cannot install ${need[*]} (apt-get install ${need[*]})"
fi

step "desktop file and AppStream metainfo"
desktop-file-validate "$root/packaging/io.clusterppl.ClusterPPL.desktop"
appstreamcli validate --no-net "$root/packaging/io.clusterppl.ClusterPPL.metainfo.xml"

step "build ($build)"
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake --preset default -B "$build" -DCLUSTERPPL_BUILD_BENCH=OFF -DBUILD_TESTING=OFF >/dev/null
fi
cmake --build "$build" --target clusterppl-agent clusterppl clusterppl-cli

work=$(mktemp -d /tmp/cppl-package-check.XXXXXX)
installed=0
cleanup() {
  if ((installed)); then
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get purge -y -qq clusterppl clusterppl-agent >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# An isolated user: the dashboard's settings and the run store must start empty and stay out of ~.
export HOME=$work/home XDG_CONFIG_HOME=$work/home/.config XDG_DATA_HOME=$work/home/.local/share XDG_STATE_HOME=$work/home/.local/state
mkdir -p "$HOME"

step "relocated prefix: cmake --install to $work/reloc"
cmake --install "$build" --prefix "$work/reloc" >/dev/null
(cd /tmp && QT_QPA_PLATFORM=offscreen "$work/reloc/bin/clusterppl" --screenshot "$work/shots-reloc" >/dev/null) \
  || fail "the dashboard of a relocated prefix did not render its pages"
grep -rqs "$work/reloc/share/clusterppl/profiles/local-default.json" "$XDG_CONFIG_HOME" \
  || fail "the relocated dashboard did not open its own share/clusterppl/profiles/local-default.json"
rm -rf "$XDG_CONFIG_HOME"

step "cpack"
rm -f "$build"/clusterppl*.deb
(cd "$build" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log" >&2; fail "cpack failed"; }
agent_deb=$(ls "$build"/clusterppl-agent_*.deb)
dash_deb=$(ls "$build"/clusterppl_*.deb)
for d in "$agent_deb" "$dash_deb"; do
  echo "-- $(basename "$d")"; dpkg-deb -f "$d" Package Version Depends Recommends Installed-Size
done

step "dependencies and contents"
agent_dep=$(dpkg-deb -f "$agent_deb" Depends)
dash_dep=$(dpkg-deb -f "$dash_deb" Depends)
[[ $agent_dep != *libqt6* ]] || fail "clusterppl-agent depends on Qt: $agent_dep"
for lib in libtorch libzmq5 libc6; do
  [[ $agent_dep == *"$lib"* ]] || fail "clusterppl-agent's Depends lacks $lib: $agent_dep"
done
for lib in libqt6widgets6 libqt6sql6 libqt6sql6-sqlite libqt6svg6 libssh-4 libzmq5; do
  [[ $dash_dep == *"$lib"* ]] || fail "clusterppl's Depends lacks $lib: $dash_dep"
done
[[ $(dpkg-deb -f "$dash_deb" Recommends) == *clusterppl-agent* ]] || fail "clusterppl does not recommend clusterppl-agent"
dpkg-deb -c "$agent_deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/agent.files"
dpkg-deb -c "$dash_deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/dash.files"
expect() {  # expect LIST FILE...
  local list=$1; shift
  for f in "$@"; do grep -qx "$f" "$list" || fail "$(basename "$list" .files) package lacks $f"; done
}
expect "$work/agent.files" /usr/bin/clusterppl-agent /usr/share/doc/clusterppl-agent/copyright \
  /usr/share/doc/clusterppl-agent/changelog.gz /usr/share/man/man1/clusterppl-agent.1.gz \
  /usr/share/doc/clusterppl-agent/README.md /usr/share/doc/clusterppl-agent/docs/exit-codes.md \
  /usr/share/bash-completion/completions/clusterppl-agent \
  /usr/share/clusterppl/models/shakespeare-byte-llama/model.safetensors \
  /usr/share/clusterppl/models/shakespeare-byte-llama/config.json \
  /usr/share/clusterppl/data/tinyshakespeare-heldout.txt
expect "$work/agent.files" /usr/lib/clusterppl/clusterppl-agent-torch
# The front starts without LibTorch (docs/ARCHITECTURE.md, "The agent's two halves").
dpkg-deb -x "$agent_deb" "$work/agent-root"
front_needs=$(readelf -d "$work/agent-root/usr/bin/clusterppl-agent" | grep NEEDED)
torch_needs=$(readelf -d "$work/agent-root/usr/lib/clusterppl/clusterppl-agent-torch" | grep NEEDED)
! grep -Eq 'libtorch|libc10' <<<"$front_needs" || fail "/usr/bin/clusterppl-agent links LibTorch: $front_needs"
grep -q libtorch <<<"$torch_needs" || fail "/usr/lib/clusterppl/clusterppl-agent-torch does not link LibTorch: $torch_needs"
if [[ -f $build/agent/libclusterppl_spm.so ]]; then
  expect "$work/agent.files" /usr/lib/clusterppl/libclusterppl_spm.so
fi
expect "$work/dash.files" /usr/bin/clusterppl /usr/bin/clusterppl-cli /usr/share/doc/clusterppl/copyright \
  /usr/share/doc/clusterppl/changelog.gz /usr/share/doc/clusterppl/docs/packaging.md /usr/share/man/man1/clusterppl.1.gz /usr/share/man/man1/clusterppl-cli.1.gz \
  /usr/share/bash-completion/completions/clusterppl-cli /usr/share/applications/io.clusterppl.ClusterPPL.desktop \
  /usr/share/metainfo/io.clusterppl.ClusterPPL.metainfo.xml /usr/share/icons/hicolor/scalable/apps/clusterppl.svg \
  /usr/share/icons/hicolor/48x48/apps/clusterppl.png /usr/share/icons/hicolor/64x64/apps/clusterppl.png \
  /usr/share/icons/hicolor/128x128/apps/clusterppl.png /usr/share/icons/hicolor/256x256/apps/clusterppl.png \
  /usr/share/clusterppl/profiles/local-default.json
! grep -q clusterppl-agent "$work/dash.files" || fail "clusterppl ships agent files: $(grep clusterppl-agent "$work/dash.files")"
! grep -Eq '^/usr/(bin/clusterppl(-cli)?|share/applications/.*)$' "$work/agent.files" || fail "clusterppl-agent ships dashboard files"

step "lintian"
lintian --tag-display-limit 0 "$agent_deb" "$dash_deb" >"$work/lintian.log" 2>&1 || true
cat "$work/lintian.log" >&2
errors=$(grep -c '^E: ' "$work/lintian.log" || true)
((errors == 0)) || fail "lintian reports $errors error(s) (above)"
echo "lintian: 0 errors, $(grep -c '^W: ' "$work/lintian.log" || true) warning(s) (kept ones: docs/packaging.md)" >&2

step "install both packages with apt"
installed=1
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$agent_deb" "$dash_deb" >"$work/apt.log" 2>&1 \
  || { cat "$work/apt.log" >&2; fail "apt-get install of the packages failed"; }

cd /tmp
step "installed: --version, --help, man pages, completions"
[[ $(command -v clusterppl-agent) == /usr/bin/clusterppl-agent ]] || fail "clusterppl-agent is not /usr/bin/clusterppl-agent"
clusterppl-agent --version
clusterppl-cli --help >"$work/cli.help"
QT_QPA_PLATFORM=offscreen clusterppl --help >"$work/dash.help"
clusterppl-agent --help >"$work/agent.help"
clusterppl-cli run --help >>"$work/cli.help"
# Every option --help names is in the man page (generated from --help) and offered by the completion.
options_of() { grep -oE -- '(^|[ ,(|\[])--[a-z][a-z0-9-]+' "$1" | sed 's/^[^-]*//' | sort -u; }
for exe in clusterppl-agent clusterppl-cli clusterppl; do
  case $exe in clusterppl-agent) help=$work/agent.help ;; clusterppl-cli) help=$work/cli.help ;; *) help=$work/dash.help ;; esac
  man_text=$(zcat "/usr/share/man/man1/$exe.1.gz" | sed 's/\\-/-/g')
  for o in $(options_of "$help"); do
    grep -qE -- "(^|[^a-z0-9-])$o([^a-z0-9-]|$)" <<<"$man_text" || fail "man page of $exe lacks $o, which $exe --help lists"
  done
  MANWIDTH=100 man "$exe" >/dev/null 2>&1 || man -l "/usr/share/man/man1/$exe.1.gz" >/dev/null 2>&1 || true
done
for exe in clusterppl-agent clusterppl-cli; do
  case $exe in clusterppl-agent) help=$work/agent.help ;; *) help=$(mktemp -p "$work"); clusterppl-cli run --help >"$help" ;; esac
  for o in $(options_of "$help"); do
    [[ $o == --version || $o == --help ]] && continue
    grep -qE -- "(^|[^a-z0-9-])$o([^a-z0-9-]|$)" "/usr/share/bash-completion/completions/$exe" || fail "bash completion of $exe lacks $o ($exe --help lists it)"
  done
done

step "installed: 2-rank standalone evaluation of the demo model"
share=/usr/share/clusterppl
clusterppl-agent run --standalone --nproc-per-node 2 -- --model "$share/models/shakespeare-byte-llama" \
  --text "$share/data/tinyshakespeare-heldout.txt" --tokenizer bytes --max-windows 8 --context 128 --threads 1 \
  --json "$work/eval.json" --quiet
python3 - "$work/eval.json" <<'EOF'
import json, math, sys
r = json.load(open(sys.argv[1]))
ppl = r.get("ppl")
assert isinstance(ppl, (int, float)) and math.isfinite(ppl) and 1 < ppl < 256, f"perplexity {ppl!r} out of range: {r}"
print(f"standalone 2 ranks: perplexity {ppl}")
EOF

step "installed: clusterppl-cli run of the default profile (its first 32 windows)"
# The whole held-out text takes minutes on 2 cores: the same profile, its relative paths resolved
# against the installed one's directory (so they must exist there), cut to 32 windows.
python3 - "$share/profiles/local-default.json" "$work/short-default.json" <<'PY'
import json, os, sys
src, dst = sys.argv[1:]
p = json.load(open(src))
ev = p["evaluation"]
for key in ("model", "text"):
    path = os.path.normpath(os.path.join(os.path.dirname(src), ev[key]))
    assert os.path.exists(path), f"{src}: evaluation.{key} {ev[key]!r} resolves to {path}, which does not exist"
    ev[key] = path
ev["max_windows"] = 32
json.dump(p, open(dst, "w"))
PY
clusterppl-cli run --profile "$work/short-default.json" --no-store --json "$work/cli.json" --log-dir "$work/logs" \
  >"$work/cli-run.log" 2>&1 || { tail -30 "$work/cli-run.log" >&2; fail "clusterppl-cli run of the installed default profile failed"; }
grep -v '^\[live\]' "$work/cli-run.log" | tail -3
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert 1 < r["ppl"] < 256, r; print("clusterppl-cli run: perplexity", r["ppl"])' "$work/cli.json"

step "installed: dashboard offscreen on the default profile"
QT_QPA_PLATFORM=offscreen clusterppl --screenshot "$work/shots" >"$work/shots.list"
(($(grep -c '\.png$' "$work/shots.list") >= 3)) || fail "the dashboard rendered fewer than 3 pages: $(cat "$work/shots.list")"
grep -rqs "$share/profiles/local-default.json" "$XDG_CONFIG_HOME" \
  || fail "the installed dashboard did not open $share/profiles/local-default.json"

step "purge both packages"
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get purge -y -qq clusterppl clusterppl-agent >/dev/null
installed=0
for p in clusterppl clusterppl-agent; do
  ! dpkg -L "$p" >/dev/null 2>&1 || fail "$p is still known to dpkg after purge"
done
for f in /usr/bin/clusterppl /usr/bin/clusterppl-cli /usr/bin/clusterppl-agent /usr/share/clusterppl /usr/lib/clusterppl \
         /usr/share/doc/clusterppl /usr/share/doc/clusterppl-agent /usr/share/applications/io.clusterppl.ClusterPPL.desktop; do
  [[ ! -e $f ]] || fail "$f is left after purging"
done
while read -r f; do
  [[ $f == */ || ! -e $f ]] || fail "$f (from a package) is left after purging"
done < <(cat "$work/agent.files" "$work/dash.files")
# ...and the user's data is the user's: the purge must not touch $HOME.
grep -rqs "local-default.json" "$XDG_CONFIG_HOME" || fail "purging removed the user's settings in $XDG_CONFIG_HOME"
echo "package-check: OK in $((SECONDS - start)) s (user data such as ~/.local/share/clusterppl is the user's to keep)" >&2
