package tools

import (
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/agent/internal/secrets"
)

func TestHeadersResolveSecretReferences(t *testing.T) {
	b, err := secrets.FromEnv(func(string) string { return "" }, []string{"OIKOS_SECRET_GRAFANA_TOKEN=glsa_value-123"})
	if err != nil {
		t.Fatal(err)
	}
	c := &Call{deps: &Deps{Secrets: b}}
	h, err := c.headers(t.Context(), map[string]string{"authorization": "Bearer secret:grafana_token", "X-Plain": "secret-less value"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Get("Authorization") != "Bearer glsa_value-123" || h.Get("X-Plain") != "secret-less value" {
		t.Fatalf("headers %v", h)
	}
	if c.resolved["grafana_token"] != "glsa_value-123" {
		t.Fatal("the resolved value is not remembered for redaction")
	}
	for in, want := range map[string]string{
		"Host":      "set by Oikos",
		"Bad Name":  "not a valid header name",
		"X-Missing": `no secret named "nope"`,
		"X-Bad-Ref": "invalid secret name",
	} {
		v := "secret:nope"
		switch in {
		case "Host", "Bad Name":
			v = "x"
		case "X-Bad-Ref":
			v = "secret:a/b"
		}
		_, err := c.headers(t.Context(), map[string]string{in: v})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	none := &Call{deps: &Deps{}}
	if _, err := none.headers(t.Context(), map[string]string{"A": "secret:x"}); err == nil || !strings.Contains(err.Error(), "no secrets backend") {
		t.Fatalf("no backend: %v", err)
	}
}
