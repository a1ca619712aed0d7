package labsim

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// hostRT is a host of the lab with what its SSH listener needs. Mutable fields are guarded
// by the lab's lock (Sim.mu).
type hostRT struct {
	*lab.Host
	key    ssh.Signer
	altKey ssh.Signer

	actual string
	ln     net.Listener
	conns  map[net.Conn]struct{}
	total  int
	// haCancel stops the pending HA recovery of this node's guests (nil when none is).
	haCancel context.CancelFunc
}

func (s *Sim) guestDir(host string, vmid int) string { return s.lab.GuestDir(host, vmid) }

func (s *Sim) newHost(h Host) (*hostRT, error) {
	key, err := loadOrCreateKey(filepath.Join(s.opts.StateDir, "keys", h.Name+".key"))
	if err != nil {
		return nil, fmt.Errorf("labsim: host key of %s: %w", h.Name, err)
	}
	alt, err := loadOrCreateKey(filepath.Join(s.opts.StateDir, "keys", h.Name+".changed.key"))
	if err != nil {
		return nil, fmt.Errorf("labsim: changed host key of %s: %w", h.Name, err)
	}
	var extra shell.Registry
	if h.Kind == KindProxmox {
		extra = s.pve.Programs(h.Name)
	}
	lh, err := s.lab.AddHost(h, extra)
	if err != nil {
		return nil, err
	}
	return &hostRT{Host: lh, key: key, altKey: alt, conns: map[net.Conn]struct{}{}}, nil
}

// loadOrCreateKey reads an OpenSSH ed25519 private key, creating it on first use so a
// restart serves the same host key.
func loadOrCreateKey(path string) (ssh.Signer, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return ssh.ParsePrivateKey(data)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "labsim host key")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}
