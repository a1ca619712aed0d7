// Package api holds the api daemon's contract: openapi.yaml (OpenAPI 3.1), embedded so the
// daemon serves the exact document its tests validate every response against.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml, served at GET /api/v1/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
