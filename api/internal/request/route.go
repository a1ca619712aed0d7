package request

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
)

// Route is one endpoint of the api: its method and path (under the group it is mounted on,
// echo's :param syntax), the permission its token's role must hold, and its handler. Every
// surface declares its endpoints as a []Route and mounts them with Mount; api/openapi.yaml
// must list each one (the tests fail on a route it lacks).
type Route struct {
	Method  string
	Path    string
	Perm    auth.Permission
	Handler echo.HandlerFunc
}

// GET, POST, PUT, PATCH and DELETE are the routes of a table (see httpapi's routes).
func GET(path string, perm auth.Permission, h echo.HandlerFunc) Route {
	return Route{Method: http.MethodGet, Path: path, Perm: perm, Handler: h}
}

// POST is a POST route.
func POST(path string, perm auth.Permission, h echo.HandlerFunc) Route {
	return Route{Method: http.MethodPost, Path: path, Perm: perm, Handler: h}
}

// PUT is a PUT route.
func PUT(path string, perm auth.Permission, h echo.HandlerFunc) Route {
	return Route{Method: http.MethodPut, Path: path, Perm: perm, Handler: h}
}

// PATCH is a PATCH route.
func PATCH(path string, perm auth.Permission, h echo.HandlerFunc) Route {
	return Route{Method: http.MethodPatch, Path: path, Perm: perm, Handler: h}
}

// DELETE is a DELETE route.
func DELETE(path string, perm auth.Permission, h echo.HandlerFunc) Route {
	return Route{Method: http.MethodDelete, Path: path, Perm: perm, Handler: h}
}

// Mount adds routes to g, each the same way: Catch first (any error, the guard's included,
// becomes problem JSON here, whatever echo's error handler is), then Guard for the route's
// permission over v, then the handler. A request already admitted by a guard is not looked
// up again, so one token lookup serves every route of the api.
func Mount(g *echo.Group, v Verifier, log zerolog.Logger, routes ...Route) {
	catch := Catch(log)
	for _, r := range routes {
		if r.Perm == Public {
			g.Add(r.Method, r.Path, r.Handler, catch)
			continue
		}
		g.Add(r.Method, r.Path, r.Handler, catch, Guard(v, r.Perm))
	}
}
