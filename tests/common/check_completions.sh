#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every option an executable's --help lists is offered by its bash completion (packaging/completions/),
# the same rule scripts/package-check.sh applies to the installed packages, here at build time so a
# new option without its completion fails the suite, not only the packaging step of CI.
# Usage: check_completions.sh SOURCE_DIR NAME=EXE[:SUBCOMMAND...] ...
set -euo pipefail
src=$1; shift
status=0
options_of() { grep -oE -- '(^|[ ,(|\[])--[a-z][a-z0-9-]+' | sed 's/^[^-]*//' | sort -u; }
for spec in "$@"; do
  name=${spec%%=*}; rest=${spec#*=}; exe=${rest%%:*}
  completion=$src/packaging/completions/$name
  [[ -f $completion ]] || { echo "FAIL: no completion file $completion"; status=1; continue; }
  IFS=: read -r -a parts <<<"$rest"
  help=$("$exe" --help 2>&1 || true)
  for sub in "${parts[@]:1}"; do help+=$'\n'$("$exe" "$sub" --help 2>&1 || true); done
  n=0
  for o in $(options_of <<<"$help"); do
    [[ $o == --version || $o == --help ]] && continue
    n=$((n + 1))
    grep -qE -- "(^|[^a-z0-9-])$o([^a-z0-9-]|$)" "$completion" || { echo "FAIL: $completion lacks $o ($name --help lists it)"; status=1; }
  done
  (( n > 10 )) || { echo "FAIL: $name --help listed only $n options; is $exe the right executable?"; status=1; }
  echo "$name: $n options checked"
done
exit $status
