// Package apierr is the api's one set of errors a client can cause: the sentinels every api
// package returns wrapped (errors.Is finds them), the field error that names what to fix
// (errors.As finds it), and the extension an answer may need beyond its message.
//
// Nothing here knows HTTP. api/internal/request turns these errors into problem documents in
// one table (request.ToProblem): the status and the problem kind of each sentinel are chosen
// there and nowhere else. A new kind of failure is a sentinel here and a row there.
//
// A refused token is auth.ErrUnauthenticated or auth.ErrForbidden (api/internal/auth): the
// guard raises them, and a service refusing a role wraps auth.ErrForbidden.
package apierr

import (
	"errors"
	"fmt"
)

// The sentinels. Wrap one with detail: fmt.Errorf("%w: entity %q", apierr.ErrNotFound, ref).
var (
	// ErrNotFound: nothing with that id or slug (entity, relationship, document, signal,
	// execution, approval).
	ErrNotFound = errors.New("not found")
	// ErrConflict: it exists but is not in a state the request applies to (a resolved
	// signal).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: a malformed request value (an empty name, a bad slug, a missing field).
	ErrInvalid = errors.New("invalid value")
	// ErrVersionConflict: the expected version is not the current one.
	ErrVersionConflict = errors.New("version conflict")
	// ErrDuplicate: something with that slug exists already.
	ErrDuplicate = errors.New("duplicate slug")
	// ErrIdempotencyMismatch: the Idempotency-Key was used before with another body.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request body")
	// ErrSchedulerOwned: the attribute is written only by the scheduler.
	ErrSchedulerOwned = errors.New("health, last_check_at and last_check are owned by the scheduler: " +
		"they are set from the results of the entity's checks and cannot be written; " +
		"read them with GET /api/v1/entities/{slug} or GET /api/v1/health/summary")
	// ErrPreconditionFailed: a state transition's precondition does not hold.
	ErrPreconditionFailed = errors.New("transition precondition failed")
	// ErrRefused: the execution gate refused a request or a decision; nothing was written.
	ErrRefused = errors.New("refused by the gate")
	// ErrAlreadyDecided: a decision that lost: the approval was decided already, or its
	// execution has started.
	ErrAlreadyDecided = errors.New("already decided")
)

// FieldError is the request field at fault and why: a body member ("name",
// "attributes.vmid"), a query or path parameter, a header ("Idempotency-Key"); "" when the
// failure is not one field's. Err is the sentinel (or the domain error, such as an
// ontology one) it is an instance of, which errors.Is sees through; a FieldError without
// one is a plain validation failure.
type FieldError struct {
	Field  string
	Reason string
	Err    error
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap exposes the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// Invalid is a FieldError of ErrInvalid, its reason formatted.
func Invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrInvalid}
}

// Extended is an error whose answer says more than its message. Detail, when set, is what
// the client reads instead of Err's message; the other members go out as they are (the
// execution gate's refusal code, the approval a refusal waits on or a decision lost to).
type Extended struct {
	Err        error
	Detail     string
	Code       string
	ApprovalID string
	RiskClass  string
	// Approval is typed any so that this package depends on no service.
	Approval any
}

// Error implements error.
func (e *Extended) Error() string { return e.Err.Error() }

// Unwrap exposes the error extended.
func (e *Extended) Unwrap() error { return e.Err }

// Mark returns err, with its message unchanged, as an instance of sentinel as well:
// errors.Is matches both sentinel and whatever err wraps. It is how a package whose own
// sentinels predate this set joins it.
func Mark(err, sentinel error) error {
	if err == nil || errors.Is(err, sentinel) {
		return err
	}
	return &marked{err: err, sentinel: sentinel}
}

type marked struct{ err, sentinel error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.sentinel, m.err} }
