#!/usr/bin/env bash
# Builds the dashboard (api/web) into api/web/dist, which oikos-api embeds: npm ci from the
# lock file when the installed tree is missing or older than the lock, then the app's build
# (types generated from api/openapi.yaml, svelte-check, vite build). `make build` runs it
# before compiling the api, so the binary always carries the app built from this tree.
set -euo pipefail
scripts=$(cd "$(dirname "$0")" && pwd)
cd "$scripts/../api/web"
. "$scripts/web-deps.sh" build-web
npm run --silent build
