package secretbox_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/secretbox"
)

var key = bytes.Repeat([]byte{7}, 32)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSealOpen(t *testing.T) {
	b, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed := b.Seal("grafana_token", "the value")
	if bytes.Contains(sealed, []byte("the value")) {
		t.Fatal("sealed value holds the plaintext")
	}
	if v, err := b.Open("grafana_token", sealed, b.KeyID()); err != nil || v != "the value" {
		t.Fatalf("open: %q %v", v, err)
	}
	if _, err := b.Open("other", sealed, b.KeyID()); err == nil {
		t.Fatal("a value moved to another name opened")
	}
	other, _ := secretbox.New(bytes.Repeat([]byte{8}, 32))
	if _, err := other.Open("grafana_token", sealed, b.KeyID()); !errors.Is(err, secretbox.ErrWrongKey) {
		t.Fatalf("other key: %v", err)
	}
	if bytes.Equal(b.Seal("n", "v"), b.Seal("n", "v")) {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
}

func TestFromEnv(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString(key)
	for _, k := range []string{b64, strings.TrimRight(b64, "="), hex.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key)} {
		if _, err := secretbox.FromEnv(env(map[string]string{secretbox.KeyVar: k})); err != nil {
			t.Fatalf("key %q: %v", k, err)
		}
	}
	if _, err := secretbox.FromEnv(env(nil)); !errors.Is(err, secretbox.ErrNoKey) {
		t.Fatalf("no key: %v", err)
	}
	if _, err := secretbox.FromEnv(env(map[string]string{secretbox.KeyVar: "short"})); !errors.Is(err, secretbox.ErrKey) || !strings.Contains(err.Error(), "OIKOS_SECRETS_KEY") {
		t.Fatalf("short key: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte(b64+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := secretbox.FromEnv(env(map[string]string{secretbox.KeyFileVar: file}))
	if err != nil {
		t.Fatal(err)
	}
	fromVar, _ := secretbox.FromEnv(env(map[string]string{secretbox.KeyVar: b64}))
	if fromFile.KeyID() != fromVar.KeyID() {
		t.Fatal("one key, two ids")
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := secretbox.FromEnv(env(map[string]string{secretbox.KeyFileVar: file})); !errors.Is(err, secretbox.ErrKey) || !strings.Contains(err.Error(), "readable by other users") {
		t.Fatalf("world-readable file: %v", err)
	}
	if _, err := secretbox.FromEnv(env(map[string]string{secretbox.KeyFileVar: file, secretbox.KeyVar: b64})); !errors.Is(err, secretbox.ErrKey) {
		t.Fatalf("both: %v", err)
	}
}

func TestNamesAndRefs(t *testing.T) {
	for in, want := range map[string]string{"Grafana_Token": "grafana_token", " a.b-c ": "a.b-c", "9": "9"} {
		if got, err := secretbox.Name(in); err != nil || got != want {
			t.Fatalf("Name(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", ".hidden", "a b", "a/b", "ä", strings.Repeat("a", 129), "x=y"} {
		if _, err := secretbox.Name(bad); !errors.Is(err, secretbox.ErrName) {
			t.Fatalf("Name(%q): %v", bad, err)
		}
	}
	if n, ok, err := secretbox.Ref("secret:Grafana"); !ok || err != nil || n != "grafana" {
		t.Fatalf("ref: %q %v %v", n, ok, err)
	}
	if _, ok, _ := secretbox.Ref("Bearer secret"); ok {
		t.Fatal("not a reference")
	}
	if _, ok, err := secretbox.Ref("secret:a b"); !ok || err == nil {
		t.Fatal("bad reference accepted")
	}
}
