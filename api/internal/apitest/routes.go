package apitest

import (
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/pb33f/libopenapi"

	"github.com/oikos-hq/oikos/api"
)

// SpecOperations is every operation of api/openapi.yaml as "METHOD /path/{param}".
func SpecOperations(t testing.TB) map[string]bool {
	t.Helper()
	doc, err := libopenapi.NewDocument(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().KeysFromOldest() {
			ops[strings.ToUpper(method)+" "+path] = true
		}
	}
	return ops
}

// ServedOperations is what an echo server registered, as "METHOD /path/{param}": echo's
// :param is the spec's {param}. Left out: the not-found catch-alls a group with middleware
// registers (so unknown paths under it still pass its middleware) and the dashboard's "/*"
// (the app, not an api operation).
func ServedOperations(routes []*echo.Route) map[string]bool {
	served := map[string]bool{}
	for _, r := range routes {
		if r.Method == echo.RouteNotFound || r.Path == "/*" {
			continue
		}
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if strings.HasPrefix(p, ":") {
				parts[i] = "{" + p[1:] + "}"
			}
		}
		served[r.Method+" "+strings.Join(parts, "/")] = true
	}
	return served
}

// RoutesMatchSpec fails t for every served route that is not an operation of openapi.yaml
// and every operation of openapi.yaml the server does not serve, and returns what is served.
func RoutesMatchSpec(t testing.TB, routes []*echo.Route) map[string]bool {
	t.Helper()
	inSpec, served := SpecOperations(t), ServedOperations(routes)
	for _, op := range sorted(served) {
		if !inSpec[op] {
			t.Errorf("route %s is not in openapi.yaml", op)
		}
	}
	for _, op := range sorted(inSpec) {
		if !served[op] {
			t.Errorf("openapi.yaml has %s, which the server does not serve", op)
		}
	}
	return served
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
