#!/usr/bin/env bash
# Builds the dashboard (api/web) into api/web/dist, which oikos-api embeds: npm ci from the
# lock file when the installed tree is missing or older than the lock, then the app's build
# (types generated from api/openapi.yaml, svelte-check, vite build). `make build` runs it
# before compiling the api, so the binary always carries the app built from this tree.
set -euo pipefail
cd "$(dirname "$0")/../api/web"
if ! command -v npm >/dev/null 2>&1; then
  echo "build-web: need node (20 or later) and npm on PATH to build the dashboard (api/web)" >&2
  exit 1
fi
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "build-web: npm ci in api/web"
  npm ci --no-audit --no-fund
fi
npm run --silent build
