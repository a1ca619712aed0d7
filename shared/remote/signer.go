package remote

import (
	"errors"
	"fmt"
	"os"

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
