#!/usr/bin/env bash
# Runs the dashboard's unit tests (api/web, vitest under jsdom): the formatting helpers, the
# api client's error handling, the fleet pages' filters and the markdown renderer and
# sanitizer against hostile input. npm ci from the lock file when the installed tree is
# missing or older than the lock, as scripts/build-web.sh does (scripts/web-deps.sh). `make test` runs it.
set -euo pipefail
scripts=$(cd "$(dirname "$0")" && pwd)
cd "$scripts/../api/web"
. "$scripts/web-deps.sh" test-web
npm run --silent test
