#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the libFuzzer targets of tests/fuzz (docs/fuzzing.md), --jobs at a time, and prints, per
# target, the executions, exec/s, coverage and whether it crashed. Builds a clang-only tree in
# build/fuzz (no Qt GUI, no agent, no LibTorch) and seeds each corpus from the repository's real
# files (tests/fuzz/make_seeds.py); the corpora grow in build/fuzz/corpus/<target> between runs.
#
#   scripts/fuzz.sh [--seconds S] [--runs N] [--timeout T] [--jobs J] [TARGET...]
#     --seconds S   per target (default 600; 0 = no time limit, then give --runs)
#     --runs N      stop a target after N executions (default: no limit)
#     --timeout T   wall-clock seconds one input may take before it counts as a hang (default 1;
#                   on a heavily loaded machine a stalled process can pass 1 s on a fast input)
#     --jobs J      targets fuzzed at once, one core each (default: the cores, nproc)
#     TARGET        profile hostfile telemetry_decode result_json model_config safetensors npy
#                   tokenizer_json spm_model (default: all of them)
# Exit status: 0 when no target found anything, 1 otherwise (crash-*, leak-*, timeout-*, oom-* files
# are left in build/fuzz/fuzz-artifacts/; replay one with build/fuzz/tests/fuzz/fuzz_TARGET FILE).
# Logs: build/fuzz/fuzz-logs/TARGET-TIME.log; every summary is appended to build/fuzz/fuzz-summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
runs=-1
timeout=1
jobs=$(nproc)
targets=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(profile hostfile telemetry_decode result_json model_config safetensors npy tokenizer_json spm_model rendezvous_server)
((${#targets[@]})) || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target \"$t\" (known: ${all[*]})" >&2; exit 2; }
done
[[ $seconds =~ ^[0-9]+$ && $runs =~ ^-?[0-9]+$ && $timeout =~ ^[1-9][0-9]*$ && $jobs =~ ^[1-9][0-9]*$ ]] ||
  { echo "fuzz.sh: --seconds, --runs, --timeout and --jobs take whole numbers (--timeout and --jobs at least 1)" >&2; exit 2; }
((seconds > 0 || runs >= 0)) || { echo "fuzz.sh: --seconds 0 needs --runs N" >&2; exit 2; }

# Largest input per target: a little above the seeds, so mutations stay cheap and parsers see whole
# documents.
declare -A max_len=([profile]=4096 [hostfile]=2048 [telemetry_decode]=8192 [result_json]=4096 [model_config]=2048
                    [safetensors]=4096 [npy]=1024 [tokenizer_json]=16384 [spm_model]=8192 [rendezvous_server]=2048)

build=build/fuzz
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is missing (apt-get install clang)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "fuzz.sh: python3 is missing (it writes the seed corpora)" >&2; exit 1; }
if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCLUSTERPPL_BUILD_FUZZ=ON -DCLUSTERPPL_BUILD_GUI=OFF -DCLUSTERPPL_BUILD_AGENT=OFF -DCLUSTERPPL_BUILD_BENCH=OFF \
    $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
fi
ninja -C "$build" "${targets[@]/#/fuzz_}"
python3 tests/fuzz/make_seeds.py "$build/corpus"
mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"

# One target: fuzzes it and writes its summary line to $build/fuzz-logs/$t.summary; exit 1 when it
# found something. Each libFuzzer process is single-threaded, so --jobs of them share the cores.
fuzz_one() {
  local t=$1 log rc=0 execs rate units corpus verdict
  log=$build/fuzz-logs/$t-$(date -u +%Y%m%dT%H%M%S).log
  # -report_slow_units=1 keeps (slow-unit-*) and reports any input slower than the 1 s budget
  # without stopping, also when --timeout is raised for a loaded machine.
  local args=(-max_len="${max_len[$t]}" -timeout="$timeout" -report_slow_units=1 -rss_limit_mb=2048 -malloc_limit_mb=1024
              -artifact_prefix="$build/fuzz-artifacts/$t-" -print_final_stats=1)
  ((seconds > 0)) && args+=(-max_total_time="$seconds")
  ((runs >= 0)) && args+=(-runs="$runs")
  echo "== fuzz_$t: ${seconds}s$( ((runs >= 0)) && echo ", at most $runs runs") (log $log) =="
  "$build/tests/fuzz/fuzz_$t" "${args[@]}" "$build/corpus/$t" >"$log" 2>&1 || rc=$?
  stat() { grep -m1 "^stat::$1:" "$log" | awk '{print $2}' || true; } # a crash may print no stats
  execs=$(stat number_of_executed_units); rate=$(stat average_exec_per_sec); units=$(stat new_units_added)
  corpus=$(find "$build/corpus/$t" -type f | wc -l)
  verdict=ok
  if ((rc != 0)); then
    verdict="FOUND (exit $rc): $(grep -m1 -E 'ERROR: |fuzz property violated|runtime error|deadly signal|uncaught|terminate called' "$log" || echo see log)"
    grep -m3 'Test unit written to' "$log" || true
  fi
  printf '%-18s %12s %8s %7s %7s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${units:-?}" "$corpus" "$verdict" >"$build/fuzz-logs/$t.summary"
  [[ $verdict == ok ]]
}

failed=0
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || failed=1
    ((running--))
  fi
  rm -f "$build/fuzz-logs/$t.summary"
  fuzz_one "$t" &
  ((++running))
done
while ((running > 0)); do
  wait -n || failed=1
  ((running--))
done
summary=()
for t in "${targets[@]}"; do
  if [[ -s $build/fuzz-logs/$t.summary ]]; then
    summary+=("$(cat "$build/fuzz-logs/$t.summary")")
  else
    summary+=("$(printf '%-18s %12s %8s %7s %7s  %s' "$t" ? ? ? ? "no summary: the script's run of it failed")")
    failed=1
  fi
done
{
  echo
  echo "$(date -u '+%F %T UTC') scripts/fuzz.sh --seconds $seconds --runs $runs --timeout $timeout --jobs $jobs"
  printf '%-18s %12s %8s %7s %7s  %s\n' target executions exec/s new_cov corpus result
  printf '%s\n' "${summary[@]}"
} | tee -a "$build/fuzz-summary.txt"
exit "$failed"
