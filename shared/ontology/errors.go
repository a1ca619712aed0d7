package ontology

import (
	"errors"
	"fmt"
)

// Sentinel errors returned (wrapped, with detail) by the validators. Callers map them to
// HTTP problems with errors.Is.
var (
	// ErrUnknownType: no entity type of that name.
	ErrUnknownType = errors.New("unknown entity type")
	// ErrAbstractType: the type exists only to be inherited from.
	ErrAbstractType = errors.New("abstract entity type")
	// ErrUndeclaredState: the state is not one of the type's lifecycle states.
	ErrUndeclaredState = errors.New("undeclared state")
	// ErrIllegalTransition: no declared transition leads between the two states.
	ErrIllegalTransition = errors.New("illegal state transition")
	// ErrEdgeNotAllowed: the relationship type does not allow these endpoint types.
	ErrEdgeNotAllowed = errors.New("edge not allowed")
	// ErrUnknownRelationshipType: no relationship type of that name. Always returned
	// together with ErrEdgeNotAllowed.
	ErrUnknownRelationshipType = errors.New("unknown relationship type")
	// ErrInvalidAttribute: an attribute does not match the schema. Returned together with
	// one *FieldError per offending attribute.
	ErrInvalidAttribute = errors.New("invalid attribute")
)

// FieldError says which attribute failed validation and why. ValidateAttributes returns one
// per offending attribute (joined); errors.As finds the first.
type FieldError struct {
	// Field is the attribute name.
	Field string
	// Reason is a human sentence fragment such as "expected integer, got string".
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return fmt.Sprintf("attribute %q: %s", e.Field, e.Reason) }

// Is lets errors.Is(err, ErrInvalidAttribute) match any FieldError.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidAttribute }

// ParseError is one problem found while loading an ontology file, with the line it is on
// and the type (entity or relationship) it concerns.
type ParseError struct {
	// Line in the ontology file, 0 when unknown.
	Line int
	// Type is the entity or relationship type name, "" when the problem is not about one.
	Type string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *ParseError) Error() string {
	switch {
	case e.Type != "" && e.Line > 0:
		return fmt.Sprintf("ontology line %d: type %q: %s", e.Line, e.Type, e.Reason)
	case e.Type != "":
		return fmt.Sprintf("ontology: type %q: %s", e.Type, e.Reason)
	case e.Line > 0:
		return fmt.Sprintf("ontology line %d: %s", e.Line, e.Reason)
	default:
		return "ontology: " + e.Reason
	}
}
