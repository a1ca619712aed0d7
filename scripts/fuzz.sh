#!/usr/bin/env bash
# Runs every Go fuzz target in the workspace for a bounded time each (default 10s).
#
# Minimisation of new interesting inputs is bounded (-fuzzminimizetime): unbounded, it can run
# past -fuzztime and the run ends with "context deadline exceeded" although nothing failed.
# That harness time-out, and only that, is retried once; a real finding always writes a
# reproducer under testdata/fuzz and fails the run.
set -euo pipefail
fuzztime="${1:-10s}"
cd "$(dirname "$0")/.."
found=0
run() {
  go test -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" -fuzzminimizetime 5x "./$1"
}
for mod in shared testkit migrations seeds api scheduler agent deploy e2e; do
  while IFS= read -r file; do
    dir=$(dirname "$file")
    for target in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); do
      found=$((found + 1))
      echo "fuzz: ./$dir $target for $fuzztime"
      before=$( (find "$dir/testdata/fuzz/$target" -type f 2>/dev/null || true) | wc -l)
      log=$(mktemp)
      if ! run "$dir" "$target" 2>&1 | tee "$log"; then
        after=$( (find "$dir/testdata/fuzz/$target" -type f 2>/dev/null || true) | wc -l)
        if grep -q "context deadline exceeded" "$log" && [ "$before" = "$after" ]; then
          echo "fuzz: $target hit the harness time-out without a finding; running it again"
          run "$dir" "$target"
        else
          rm -f "$log"
          exit 1
        fi
      fi
      rm -f "$log"
    done
  done < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' "$mod" 2>/dev/null || true)
done
echo "fuzz: $found targets passed"
