#!/usr/bin/env bash
# Runs every Go fuzz target in the workspace for a bounded time each (default 10s).
set -euo pipefail
fuzztime="${1:-10s}"
cd "$(dirname "$0")/.."
found=0
for mod in shared migrations seeds api scheduler agent deploy e2e; do
  while IFS= read -r file; do
    dir=$(dirname "$file")
    for target in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); do
      found=$((found + 1))
      echo "fuzz: ./$dir $target for $fuzztime"
      go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "./$dir"
    done
  done < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' "$mod" 2>/dev/null || true)
done
echo "fuzz: $found targets passed"
