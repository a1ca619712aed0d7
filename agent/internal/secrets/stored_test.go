package secrets

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/oikos-hq/oikos/shared/secretbox"
)

type memStore map[string][]byte

func (m memStore) Sealed(_ context.Context, n string) ([]byte, string, bool, error) {
	v, ok := m[n]
	return v, testBox.KeyID(), ok, nil
}

func (m memStore) Names(context.Context) ([]string, error) {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

var testBox, _ = secretbox.New(bytes.Repeat([]byte{3}, 32))

func TestStoredAndChain(t *testing.T) {
	ctx := context.Background()
	st := NewStored(memStore{"db_pass": testBox.Seal("db_pass", "from-the-table"), "shared": testBox.Seal("shared", "stored-one")}, testBox)
	env, err := FromEnv(func(string) string { return "" }, []string{"OIKOS_SECRET_SHARED=env-one", "OIKOS_SECRET_TOKEN=t"})
	if err != nil {
		t.Fatal(err)
	}
	c := Chain(env, nil, st)
	if c.Name() != "env/file+stored" {
		t.Fatal(c.Name())
	}
	names, err := c.List(ctx)
	if err != nil || !slices.Equal(names, []string{"db_pass", "shared", "token"}) {
		t.Fatalf("list %v %v", names, err)
	}
	for n, want := range map[string]string{"db_pass": "from-the-table", "shared": "env-one", "TOKEN": "t"} {
		if v, err := c.Resolve(ctx, n); err != nil || v != want {
			t.Fatalf("%s: %q %v", n, v, err)
		}
	}
	if _, err := c.Resolve(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	vals, err := Values(ctx, c)
	if err != nil || len(vals) != 3 || vals["db_pass"] != "from-the-table" {
		t.Fatalf("values %v %v", vals, err)
	}
	if Chain(nil, nil) != nil || Chain(st) != st {
		t.Fatal("Chain of none or one")
	}
}
