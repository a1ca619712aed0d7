#!/usr/bin/env bash
# Installs the pinned developer tools into bin/tools/ (GOBIN=... go install), for make lint.
# Idempotent: a tool whose pinned version is already installed (recorded in
# bin/tools/<name>.version, the stamp file) is skipped. Bump a pin here and the next run
# reinstalls it.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS_DIR="$PWD/bin/tools"
GO="${GO:-go}"

# name  module path@version
TOOLS=(
  "staticcheck honnef.co/go/tools/cmd/staticcheck@v0.8.2"
)

mkdir -p "$TOOLS_DIR"
for entry in "${TOOLS[@]}"; do
  read -r name pkg <<<"$entry"
  stamp="$TOOLS_DIR/$name.version"
  if [ -x "$TOOLS_DIR/$name" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pkg" ]; then
    continue
  fi
  echo "tools: installing $pkg into bin/tools/"
  # Outside the workspace so the tool's own go.mod (not go.work) decides its dependencies.
  (cd "$TOOLS_DIR" && GOWORK=off GOFLAGS= GOBIN="$TOOLS_DIR" "$GO" install "$pkg")
  echo "$pkg" >"$stamp"
done
