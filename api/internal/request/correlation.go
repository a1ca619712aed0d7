package request

import (
	"fmt"
	"regexp"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// HeaderCorrelationID carries the correlation id in and out.
const HeaderCorrelationID = "X-Correlation-ID"

const ctxCorrelation = "oikos.correlation_id"

// correlationRe bounds what a client may send as its correlation id: it lands in logs, audit
// rows and events, so it must be short and plain.
var correlationRe = regexp.MustCompile(`^[A-Za-z0-9._:@/-]{1,128}$`)

// Correlation is a middleware that takes the client's X-Correlation-ID, or makes one (a uuid
// v7) when it is missing or unfit, puts it on the context (CorrelationID) and returns it on
// every response, so a client can quote it and the log, audit row and event carry it.
func Correlation(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(HeaderCorrelationID)
		if !correlationRe.MatchString(id) {
			u, err := uuid.NewV7()
			if err != nil {
				return fmt.Errorf("generate correlation id: %w", err)
			}
			id = u.String()
		}
		c.Set(ctxCorrelation, id)
		c.Response().Header().Set(HeaderCorrelationID, id)
		return next(c)
	}
}

// CorrelationID is the request's correlation id; "" when Correlation did not run (a feature
// package mounted on a bare echo).
func CorrelationID(c echo.Context) string {
	id, _ := c.Get(ctxCorrelation).(string)
	return id
}

// Meta is who made the request, through what, under which correlation id: what the services
// record on audit rows and events.
type Meta struct {
	Actor, Role   string
	Method, Path  string
	CorrelationID string
}

// MetaOf reads the request's Meta; Actor and Role are empty before a guard admitted it.
func MetaOf(c echo.Context) Meta {
	p, _ := Principal(c)
	return Meta{Actor: p.Name, Role: string(p.Role), Method: c.Request().Method, Path: c.Request().URL.Path,
		CorrelationID: CorrelationID(c)}
}
