// Package apitest holds what the api's HTTP test suites share: the validator of the contract
// (api/openapi.yaml) and the seeded ontology. Only tests import it.
package apitest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/oikos-hq/oikos/api"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// The validator is built once (compiling every schema takes a moment) and used under a lock:
// its caches are not documented as goroutine-safe.
var (
	specOnce sync.Once
	specVal  validator.Validator
	specErr  error
	specMu   sync.Mutex
)

func spec() (validator.Validator, error) {
	specOnce.Do(func() {
		doc, err := libopenapi.NewDocument(api.OpenAPI)
		if err != nil {
			specErr = err
			return
		}
		v, errs := validator.NewValidator(doc)
		if len(errs) > 0 {
			specErr = fmt.Errorf("%v", errs)
			return
		}
		if ok, verrs := v.ValidateDocument(); !ok {
			specErr = fmt.Errorf("openapi.yaml is not a valid OpenAPI document: %v", verrs)
			return
		}
		specVal = v
	})
	return specVal, specErr
}

// Mismatch says how a response differs from the contract.
type Mismatch struct {
	// UnknownPath is set when the request's path is not in the spec at all.
	UnknownPath bool
	Messages    []string
}

func (m *Mismatch) Error() string { return strings.Join(m.Messages, "\n  ") }

// Validate checks a response, whose body the caller has already read, against
// api/openapi.yaml. It returns nil, a *Mismatch, or an error when the spec itself is broken.
func Validate(req *http.Request, resp *http.Response, body []byte) error {
	v, err := spec()
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	cp := *resp
	cp.Body = io.NopCloser(bytes.NewReader(body))
	specMu.Lock()
	ok, errs := v.ValidateHttpResponse(req, &cp)
	specMu.Unlock()
	if ok {
		return nil
	}
	m := &Mismatch{UnknownPath: len(errs) > 0 && errs[0].ValidationType == "path"}
	for _, e := range errs {
		msg := e.Message + ": " + e.Reason
		for _, se := range e.SchemaValidationErrors {
			msg += " [" + se.FieldPath + ": " + se.Reason + "]"
		}
		m.Messages = append(m.Messages, msg)
	}
	return m
}

var (
	ontOnce sync.Once
	ont     *ontology.Ontology
	ontErr  error
)

// SeedOntology returns the embedded seed ontology, parsed once.
func SeedOntology(t testing.TB) *ontology.Ontology {
	t.Helper()
	ontOnce.Do(func() { ont, ontErr = ontology.Parse(seeds.Ontology()) })
	if ontErr != nil {
		t.Fatalf("ontology: %v", ontErr)
	}
	return ont
}
