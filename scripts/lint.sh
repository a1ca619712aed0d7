#!/usr/bin/env bash
# make lint: gofmt, go vet, staticcheck (pinned, installed by scripts/tools.sh; checks in
# staticcheck.conf) and the import-layering rules (deploy/layering) over every module of
# go.work. Every step runs; the summary names the ones that failed and the exit status is
# non-zero if any did.
set -uo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
./scripts/tools.sh || { echo "lint: installing the tools failed" >&2; exit 1; }
STATICCHECK="$PWD/bin/tools/staticcheck"

# The modules of go.work, as directories relative to the repo root.
mapfile -t MODULES < <("$GO" list -m -f '{{.Dir}}' | while read -r d; do realpath --relative-to=. "$d"; done)
if [ ${#MODULES[@]} -eq 0 ]; then
  echo "lint: go list -m found no module (is go.work here?)" >&2
  exit 1
fi
PKGS=()
for m in "${MODULES[@]}"; do PKGS+=("./$m/..."); done

failed=()
step() { printf '\n== lint: %s\n' "$1"; }

step "gofmt -l (${MODULES[*]})"
unformatted=$(gofmt -l "${MODULES[@]}" 2>&1 | grep -v '/node_modules/' || true)
if [ -n "$unformatted" ]; then
  echo "these files need gofmt (run: make fmt):"
  sed 's/^/  /' <<<"$unformatted"
  failed+=(gofmt)
fi

step "go vet"
"$GO" vet "${PKGS[@]}" || failed+=("go vet")

step "staticcheck $(cat bin/tools/staticcheck.version 2>/dev/null | sed 's/.*@//')"
"$STATICCHECK" "${PKGS[@]}" || failed+=(staticcheck)

step "import layering (deploy/layering)"
"$GO" test -count=1 ./deploy/layering/ || failed+=(layering)

echo
if [ ${#failed[@]} -gt 0 ]; then
  printf 'lint: FAILED: %s\n' "$(IFS=,; echo "${failed[*]}" | sed 's/,/, /g')" >&2
  exit 1
fi
echo "lint: ok (gofmt, go vet, staticcheck, layering)"
