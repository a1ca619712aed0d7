#!/usr/bin/env bash
# Runs the dashboard's unit tests (api/web, vitest under jsdom): the formatting helpers, the
# api client's error handling, the fleet pages' filters and the markdown renderer and
# sanitizer against hostile input. npm ci from the lock file when the installed tree is
# missing or older than the lock, as scripts/build-web.sh does. `make test` runs it.
set -euo pipefail
cd "$(dirname "$0")/../api/web"
if ! command -v npm >/dev/null 2>&1; then
  echo "test-web: need node (20 or later) and npm on PATH to test the dashboard (api/web)" >&2
  exit 1
fi
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "test-web: npm ci in api/web"
  npm ci --no-audit --no-fund
fi
npm run --silent test
