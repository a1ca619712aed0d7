package ontology

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// ValidateAttributes checks attributes against the type's schema. With create set it also
// refuses abstract types and requires every required attribute; without it (a patch) it
// checks only the keys given and refuses removing (null) a required one. Undeclared keys
// pass: they are facts learned about the entity. A null value counts as absent.
//
// Errors: ErrUnknownType, ErrAbstractType, or one *FieldError per bad attribute, joined in
// field order.
func (o *Ontology) ValidateAttributes(typ string, attrs map[string]any, create bool) error {
	t, ok := o.types[typ]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownType, typ)
	}
	if create && t.Abstract {
		return fmt.Errorf("%w: %q cannot be instantiated; use one of its subtypes", ErrAbstractType, typ)
	}
	var errs []error
	if create {
		for _, name := range t.Required {
			if attrs[name] == nil {
				errs = append(errs, &FieldError{Field: name, Reason: "required attribute is missing"})
			}
		}
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := attrs[k]
		spec, declared := t.Attributes[k]
		if v == nil {
			if !create && slices.Contains(t.Required, k) {
				errs = append(errs, &FieldError{Field: k, Reason: "required attribute cannot be removed"})
			}
			continue
		}
		if !declared {
			continue
		}
		if reason := checkValue(spec, v); reason != "" {
			errs = append(errs, &FieldError{Field: k, Reason: reason})
		}
	}
	// Required-missing errors come first; keep the rest in key order for stable messages.
	return errors.Join(errs...)
}

// checkValue returns why v does not fit spec, or "".
func checkValue(spec AttributeSpec, v any) string {
	got := describe(v)
	switch spec.Type {
	case AttrString:
		s, ok := v.(string)
		if !ok {
			return "expected string, got " + got
		}
		if len(spec.Enum) > 0 && !slices.Contains(spec.Enum, s) {
			return fmt.Sprintf("%q is not one of %s", s, strings.Join(spec.Enum, ", "))
		}
	case AttrInteger:
		if !isInteger(v) {
			return "expected integer, got " + got
		}
	case AttrNumber:
		if !isNumber(v) {
			return "expected number, got " + got
		}
	case AttrBoolean:
		if _, ok := v.(bool); !ok {
			return "expected boolean, got " + got
		}
	case AttrObject:
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
			return "expected object, got " + got
		}
	case AttrArray:
		k := reflect.ValueOf(v).Kind()
		if k != reflect.Slice && k != reflect.Array {
			return "expected array, got " + got
		}
	}
	return ""
}

// describe names a value's JSON-ish kind for error messages.
func describe(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	}
	if isInteger(v) {
		return "integer"
	}
	if isNumber(v) {
		return "number"
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// isInteger accepts Go integers and integral floats (encoding/json decodes every number
// into float64, so 101 arrives as 101.0).
func isInteger(v any) bool {
	switch x := v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	case float64:
		return !math.IsInf(x, 0) && x == math.Trunc(x)
	case float32:
		f := float64(x)
		return !math.IsInf(f, 0) && f == math.Trunc(f)
	case json.Number:
		_, err := x.Int64()
		return err == nil
	}
	return false
}

func isNumber(v any) bool {
	switch x := v.(type) {
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
	case json.Number:
		_, err := x.Float64()
		return err == nil
	}
	return isInteger(v)
}

// ValidateState checks that state is one of the type's lifecycle states.
func (o *Ontology) ValidateState(typ, state string) error {
	t, ok := o.types[typ]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownType, typ)
	}
	if !slices.Contains(t.States, state) {
		return fmt.Errorf("%w: %s has no state %q (states: %s)", ErrUndeclaredState, typ, state, strings.Join(t.States, ", "))
	}
	return nil
}

// ValidateTransition checks that an entity of type typ may move from one state to another and
// returns the preconditions the caller must verify. Staying in the same state is always
// allowed and has no preconditions. An exact From match wins over a "*" one.
func (o *Ontology) ValidateTransition(typ, from, to string) ([]string, error) {
	t, ok := o.types[typ]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, typ)
	}
	for _, s := range []string{from, to} {
		if !slices.Contains(t.States, s) {
			return nil, fmt.Errorf("%w: %s has no state %q (states: %s)", ErrUndeclaredState, typ, s, strings.Join(t.States, ", "))
		}
	}
	if from == to {
		return []string{}, nil
	}
	var wildcard *Transition
	for i := range t.Transitions {
		tr := &t.Transitions[i]
		if tr.To != to {
			continue
		}
		if tr.From == from {
			return slices.Clone(tr.Preconditions), nil
		}
		if tr.From == Wildcard && wildcard == nil {
			wildcard = tr
		}
	}
	if wildcard != nil {
		return slices.Clone(wildcard.Preconditions), nil
	}
	var allowed []string
	for _, tr := range t.Transitions {
		if tr.From == from || tr.From == Wildcard {
			allowed = append(allowed, tr.To)
		}
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("%w: %s cannot leave state %q", ErrIllegalTransition, typ, from)
	}
	return nil, fmt.Errorf("%w: %s cannot go from %q to %q (from %q it may go to %s)",
		ErrIllegalTransition, typ, from, to, from, strings.Join(allowed, ", "))
}

// ValidateEdge checks that a relationship of type relType may run from an entity of
// sourceType to one of targetType, through is-a.
func (o *Ontology) ValidateEdge(relType, sourceType, targetType string) error {
	r, ok := o.rels[relType]
	if !ok {
		return fmt.Errorf("%w: %w: %q", ErrEdgeNotAllowed, ErrUnknownRelationshipType, relType)
	}
	for _, typ := range []string{sourceType, targetType} {
		if _, ok := o.types[typ]; !ok {
			return fmt.Errorf("%w: %q", ErrUnknownType, typ)
		}
	}
	if !o.matchesAny(sourceType, r.Sources) {
		return fmt.Errorf("%w: %s may not start at %s (sources: %s)", ErrEdgeNotAllowed, relType, sourceType, strings.Join(r.Sources, ", "))
	}
	if !o.matchesAny(targetType, r.Targets) {
		return fmt.Errorf("%w: %s from %s may not point at %s (targets: %s)", ErrEdgeNotAllowed, relType, sourceType, targetType, strings.Join(r.Targets, ", "))
	}
	return nil
}

func (o *Ontology) matchesAny(typ string, allowed []string) bool {
	for _, a := range allowed {
		if a == Wildcard || o.IsA(typ, a) {
			return true
		}
	}
	return false
}
