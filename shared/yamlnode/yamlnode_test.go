package yamlnode

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestKindNameAndDeref(t *testing.T) {
	var doc yaml.Node
	src := "a: &x {k: v}\nb: *x\nc: [1]\nd: ~\ne: word\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Content[0]
	got := map[string]string{}
	for i := 0; i < len(m.Content); i += 2 {
		got[m.Content[i].Value] = KindName(Deref(m.Content[i+1]))
	}
	want := map[string]string{"a": "a mapping", "b": "a mapping", "c": "a list", "d": "nothing", "e": `the scalar "word"`}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
	if Deref(nil) != nil {
		t.Error("Deref(nil) is not nil")
	}
	if KindName(&yaml.Node{Kind: yaml.DocumentNode}) != "an unexpected node" {
		t.Error("a document node")
	}
}
