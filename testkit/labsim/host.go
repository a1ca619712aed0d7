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
	"path"
	"path/filepath"
	"strings"

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

// writeClusterFiles writes what pmxcfs shares under /etc/pve into every Proxmox node's
// sandbox: corosync.conf, the merged priv/known_hosts and every member's
// nodes/NAME/ssh_known_hosts, listing each node's original host key (a node whose fault
// changes its key still appears with the original, so a forged key shows).
func (s *Sim) writeClusterFiles() error {
	keys := map[string]string{}
	for name, h := range s.hosts {
		keys[name] = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(h.key.PublicKey())))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range s.order {
		h := s.hosts[name]
		if h.Cfg.Kind != KindProxmox {
			continue
		}
		for p, data := range s.pve.ClusterFiles(h.Host, keys) {
			if err := h.M.FS.MkdirAll(path.Dir(p), 0o755); err != nil {
				return fmt.Errorf("labsim: %s: %w", name, err)
			}
			if err := h.M.FS.WriteFile(p, data, 0o600); err != nil {
				return fmt.Errorf("labsim: %s: %w", name, err)
			}
		}
	}
	return nil
}
