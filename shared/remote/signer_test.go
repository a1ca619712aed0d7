package remote

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestLoadSigner(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, block *pem.Block) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain, err := ssh.MarshalPrivateKey(priv, "test")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}

	s, err := LoadSigner(write("id_ed25519", plain))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ssh.NewPublicKey(pub)
	if !bytes.Equal(s.PublicKey().Marshal(), want.Marshal()) {
		t.Errorf("loaded key does not match")
	}

	encPath := write("id_encrypted", enc)
	if _, err := LoadSigner(encPath); err == nil || !strings.Contains(err.Error(), "passphrase") || !strings.Contains(err.Error(), encPath) {
		t.Errorf("encrypted key: err = %v", err)
	}
	missing := filepath.Join(dir, "nope")
	if _, err := LoadSigner(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing key: err = %v", err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(garbage); err == nil {
		t.Errorf("garbage key loaded")
	}
}
