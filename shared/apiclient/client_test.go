package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/apiclient"
)

func TestClientHeadersAndProblems(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		switch r.URL.Path {
		case "/api/v1/whoami":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"name":"op","role":"operator"}`))
		case "/api/v1/executions/x":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"type":"urn:oikos:problem:conflict","title":"Conflict","status":409,"detail":"waits","field":"target","approval_id":"a1"}`))
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("upstream down\n"))
		}
	}))
	defer srv.Close()
	c, err := apiclient.New(srv.URL+"/", apiclient.Options{Token: "tok", HTTP: srv.Client(), Header: http.Header{"X-Test": {"1"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	who, err := apiclient.Decode[apiclient.WhoAmI](c.Whoami(ctx, apiclient.WithCorrelation("sess-1")))
	if err != nil || who.Name != "op" {
		t.Fatalf("whoami: %+v %v", who, err)
	}
	if got.Get("Authorization") != "Bearer tok" || got.Get("X-Correlation-ID") != "sess-1" || got.Get("X-Test") != "1" ||
		got.Get("Accept") != "application/json" {
		t.Fatalf("headers: %v", got)
	}
	_, err = apiclient.Read(c.GetExecution(ctx, "x", apiclient.WithToken("other")))
	var pe *apiclient.APIError
	if !errors.As(err, &pe) || pe.Status != 409 || pe.Field != "target" || pe.ApprovalID != "a1" ||
		err.Error() != "409 Conflict: waits (field target)" {
		t.Fatalf("problem: %#v %v", pe, err)
	}
	if got.Get("Authorization") != "Bearer other" {
		t.Fatalf("per-call token: %v", got)
	}
	err = apiclient.Expect(c.GetApproval(ctx, "y"))
	if apiclient.StatusOf(err) != http.StatusBadGateway || err.Error() != "502 Bad Gateway: upstream down" {
		t.Fatalf("plain answer: %v", err)
	}
	if _, err := apiclient.New("127.0.0.1:8080", apiclient.Options{}); err == nil {
		t.Fatal("a base without scheme is accepted")
	}
}

func TestDecodeBody(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/api/v1/whoami?x=1", nil)
	resp := &http.Response{StatusCode: http.StatusOK, Request: req}
	if v, err := apiclient.DecodeBody[map[string]int](resp, nil); err != nil || v != nil {
		t.Fatalf("empty body: %v %v", v, err)
	}
	if v, err := apiclient.DecodeBody[map[string]int](resp, []byte(`{"a":1}`)); err != nil || v["a"] != 1 {
		t.Fatalf("body: %v %v", v, err)
	}
	_, err := apiclient.DecodeBody[map[string]int](resp, []byte(`[`))
	if err == nil || !strings.Contains(err.Error(), "decode answer of GET /api/v1/whoami?x=1") {
		t.Fatalf("bad body: %v", err)
	}
}
