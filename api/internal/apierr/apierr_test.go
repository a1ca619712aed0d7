package apierr

import (
	"errors"
	"fmt"
	"testing"
)

func TestFieldError(t *testing.T) {
	t.Parallel()
	fe := &FieldError{Field: "name", Reason: "an entity lxc:web already exists", Err: ErrDuplicate}
	if fe.Error() != "name: an entity lxc:web already exists" || !errors.Is(fmt.Errorf("w: %w", fe), ErrDuplicate) {
		t.Errorf("%v", fe)
	}
	if (&FieldError{Reason: "r"}).Error() != "r" {
		t.Error("a FieldError without a field is its reason")
	}
	inv := Invalid("tags[0]", "tags must not be %s", "empty")
	var got *FieldError
	if !errors.As(fmt.Errorf("w: %w", inv), &got) || got.Field != "tags[0]" || !errors.Is(inv, ErrInvalid) {
		t.Errorf("%v", inv)
	}
}

func TestMarkAndExtended(t *testing.T) {
	t.Parallel()
	own := errors.New("not found")
	err := Mark(fmt.Errorf("%w: execution x", own), ErrNotFound)
	if err.Error() != "not found: execution x" || !errors.Is(err, ErrNotFound) || !errors.Is(err, own) {
		t.Errorf("%v", err)
	}
	if Mark(nil, ErrNotFound) != nil {
		t.Error("Mark(nil) is nil")
	}
	already := fmt.Errorf("%w: x", ErrConflict)
	if Mark(already, ErrConflict) != already {
		t.Error("an error already of the sentinel is left alone")
	}
	x := &Extended{Err: fmt.Errorf("%w: refused: no", ErrRefused), Detail: "no", Code: "syntax"}
	var e *Extended
	if !errors.As(fmt.Errorf("w: %w", x), &e) || e.Code != "syntax" || !errors.Is(x, ErrRefused) || x.Error() != "refused by the gate: refused: no" {
		t.Errorf("%v", x)
	}
}
