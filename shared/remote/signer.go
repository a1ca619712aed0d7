package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
)

// LoadSigner reads an unencrypted private key (OpenSSH or PEM format) from
// path. Only the scheduler calls it: it is the one process holding SSH keys.
// A passphrase-protected key is refused with a clear error rather than a
// prompt, because a daemon has nobody to ask.
func LoadSigner(path string) (ssh.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read ssh key %s: %w", path, err)
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("ssh key %s is passphrase-protected; the scheduler needs an unencrypted key: %w", path, err)
		}
		return nil, fmt.Errorf("parse ssh key %s: %w", path, err)
	}
	return signer, nil
}

// EnsureKeyFile returns the signer of the private key at path, generating an ed25519 key
// there first (mode 0600, its public half at path+".pub") when no file exists: compose's
// first start, where the key lives in a volume instead of being mounted. created says whether
// it was generated.
func EnsureKeyFile(path, comment string) (signer ssh.Signer, created bool, err error) {
	if _, err := os.Stat(path); err == nil {
		s, err := LoadSigner(path)
		return s, false, err
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("ssh key %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("ssh key directory: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, false, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, false, err
	}
	// O_EXCL: two processes starting at once must not both write a key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		s, err := LoadSigner(path)
		return s, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("write ssh key %s: %w", path, err)
	}
	if _, err := f.Write(pem.EncodeToMemory(block)); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("write ssh key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("write ssh key %s: %w", path, err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + comment + "\n"
	if err := os.WriteFile(path+".pub", []byte(line), 0o644); err != nil {
		return nil, false, fmt.Errorf("write ssh public key: %w", err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	return s, true, err
}

// AuthorizedKey is the authorized_keys line of a signer's public key, with comment.
func AuthorizedKey(s ssh.Signer, comment string) string {
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
	if comment != "" {
		line += " " + comment
	}
	return line
}
