package request

import (
	"fmt"
	"net/http"
)

// Problem kinds the constructors below use.
const (
	kindMalformed            = "malformed-request"
	kindValidation           = "validation"
	kindNotFound             = "not-found"
	kindTooLarge             = "payload-too-large"
	kindUnsupportedMediaType = "unsupported-media-type"
	kindUnavailable          = "unavailable"
)

// Error is an error a handler raises itself, already knowing its status, its problem kind
// and the field at fault (a body member, a query or path parameter, a header; "" for none).
type Error struct {
	Status int
	// Kind is the problem kind (the type URI's last part); "" means malformed-request.
	Kind   string
	Field  string
	Detail string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Detail
	}
	return e.Detail
}

func (e *Error) kind() string {
	if e.Kind == "" {
		return kindMalformed
	}
	return e.Kind
}

// Errorf is an Error of any status and kind, its detail formatted.
func Errorf(status int, kind, field, format string, args ...any) error {
	return &Error{Status: status, Kind: kind, Field: field, Detail: fmt.Sprintf(format, args...)}
}

// BadRequest is a malformed request (400): unparsable JSON, a bad query parameter.
func BadRequest(field, format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Kind: kindMalformed, Field: field, Detail: fmt.Sprintf(format, args...)}
}

// Unprocessable is a well-formed request with an invalid value (422).
func Unprocessable(field, format string, args ...any) error {
	return &Error{Status: http.StatusUnprocessableEntity, Kind: kindValidation, Field: field, Detail: fmt.Sprintf(format, args...)}
}

// NotFound is a resource the request names that does not exist (404).
func NotFound(format string, args ...any) error {
	return &Error{Status: http.StatusNotFound, Kind: kindNotFound, Detail: fmt.Sprintf(format, args...)}
}

// Unavailable is a part of the service that cannot answer now (503).
func Unavailable(format string, args ...any) error {
	return &Error{Status: http.StatusServiceUnavailable, Kind: kindUnavailable, Detail: fmt.Sprintf(format, args...)}
}

// TooLarge is a body over limit bytes (413).
func TooLarge(limit int64) error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Kind: kindTooLarge, Detail: tooLargeDetail(limit)}
}

func tooLargeDetail(limit int64) string { return fmt.Sprintf("request body exceeds %d bytes", limit) }

// UnsupportedMediaType is a body that is not JSON (415).
func UnsupportedMediaType(contentType string) error {
	return &Error{Status: http.StatusUnsupportedMediaType, Kind: kindUnsupportedMediaType,
		Detail: fmt.Sprintf("Content-Type %q: send application/json", contentType)}
}
