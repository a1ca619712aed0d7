#!/usr/bin/env bash
# Generates the Go client of the api (shared/apiclient/api.gen.go) from api/openapi.yaml with
# oapi-codegen at the pinned version, installed into bin/tools when missing. The same version
# is pinned in shared/go.mod as a tool, which shared/apiclient's test runs (go tool
# oapi-codegen) to fail when the committed client and the spec disagree.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
version=v2.8.2
bin="$repo/bin/tools/oapi-codegen"
if [ ! -x "$bin" ] || ! "$bin" -version 2>/dev/null | grep -qx -- "$version"; then
  echo "gen-api-client: installing oapi-codegen $version into bin/tools"
  GOBIN="$repo/bin/tools" go install "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$version"
fi
cd "$repo/shared/apiclient"
"$bin" -config oapi-codegen.yaml ../../api/openapi.yaml
echo "gen-api-client: wrote shared/apiclient/api.gen.go"
