package execapi

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/execution"
)

// serviceErrors makes the errors of h the api's (serviceError), so request.ToProblem, the
// api's one error mapping, answers them.
func serviceErrors(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error { return serviceError(h(c)) }
}

// serviceError makes an error of the execution service one of the api's (apierr), its
// message unchanged: a malformed field is an invalid field error, a gate refusal and a
// decision that lost carry their extension members (the gate's code, the approval a flood
// refusal waits on, the risk class; the approval as it now stands), a missing target,
// execution or approval is not-found, a refused role is auth's forbidden. Anything else (a
// request error, a cancelled request) is left as it is.
func serviceError(err error) error {
	var fe *execution.FieldError
	var gate *execution.RefusedError
	var ce *execution.ConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return &apierr.Extended{Err: &apierr.FieldError{Field: fe.Field, Reason: fe.Reason, Err: apierr.ErrInvalid}, Detail: fe.Reason}
	case errors.As(err, &gate):
		return &apierr.Extended{Err: apierr.Mark(err, apierr.ErrRefused), Detail: gate.Reason,
			Code: gate.Code, ApprovalID: gate.ApprovalID, RiskClass: gate.RiskClass}
	case errors.As(err, &ce):
		a := ce.Approval
		return &apierr.Extended{Err: apierr.Mark(err, apierr.ErrAlreadyDecided), Detail: ce.Reason, Approval: &a}
	case errors.Is(err, execution.ErrNotFound):
		return apierr.Mark(err, apierr.ErrNotFound)
	case errors.Is(err, execution.ErrForbidden):
		return apierr.Mark(err, auth.ErrForbidden)
	}
	return err
}
