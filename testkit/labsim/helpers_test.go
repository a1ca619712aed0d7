package labsim

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// testFleet is a small lab: a Proxmox node with containers and VMs, an empty node, a plain
// Linux host and a macOS workstation.
func testFleet() Fleet {
	return Fleet{
		Hosts: []Host{
			{
				Name: "atlas", Kind: KindProxmox, Addr: "127.0.10.1:2222", Node: "atlas", User: "root",
				Gateways: []string{"192.0.2.1"}, Cluster: "olympus", Cores: 16, MemoryMB: 65536,
				Guests: []Guest{
					{VMID: 101, Kind: GuestLXC, Name: "web", Hostname: "web", Status: StatusRunning, Units: []string{"nginx.service"}, MemoryMB: 1024, Cores: 2,
						Listeners: []Listener{{Port: 80, Unit: "nginx.service"}}},
					{VMID: 102, Kind: GuestLXC, Name: "db", Hostname: "db", Status: StatusStopped, MemoryMB: 2048, Cores: 2},
					{VMID: 103, Kind: GuestLXC, Name: "files", Hostname: "files", Status: StatusRunning, MemoryMB: 512, Cores: 1},
					{VMID: 200, Kind: GuestVM, Name: "homeassistant", Hostname: "homeassistant", Status: StatusRunning, GuestAgent: true, MemoryMB: 4096, Cores: 2},
					{VMID: 201, Kind: GuestVM, Name: "jammy-server-cloudimg-amd64", Status: StatusStopped, MemoryMB: 4096, Cores: 2},
					{VMID: 202, Kind: GuestVM, Name: "opnsense", Status: StatusRunning, GuestAgent: false, MemoryMB: 2048, Cores: 2},
				},
			},
			{Name: "boreas", Kind: KindProxmox, Addr: "127.0.10.2:2222", Node: "boreas", User: "root", Cluster: "olympus"},
			{Name: "hermes", Kind: KindLinux, Addr: "127.0.11.1:2222", User: "root", Units: []string{"frigate.service"}},
			{Name: "studio", Kind: KindDarwin, Addr: "127.0.12.1:2222", User: "dana"},
		},
		Routes: map[string]RouteTarget{
			"web.lab.example": {Host: "atlas", VMID: 101, Unit: "nginx.service"},
			"db.lab.example":  {Host: "atlas", VMID: 102},
		},
	}
}

// startSim runs a simulator on free loopback ports and stops it when the test ends.
func startSim(t *testing.T, fleet Fleet, mod func(*Options)) *Sim {
	t.Helper()
	opts := Options{
		StateDir: t.TempDir(),
		Listen:   func(string) string { return "127.0.0.1:0" },
		Logger:   zerolog.Nop(),
	}
	if mod != nil {
		mod(&opts)
	}
	sim, err := New(fleet, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := sim.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(sim.Stop)
	return sim
}

var testSigner = func() ssh.Signer {
	// A fixed client key keeps tests deterministic.
	seed := bytes.Repeat([]byte{7}, 32)
	s, err := ssh.NewSignerFromKey(ed25519Key(seed))
	if err != nil {
		panic(err)
	}
	return s
}()

// clientConfig trusts exactly the host's key and logs in as the host's user.
func clientConfig(sim *Sim, host string) *ssh.ClientConfig {
	user := "root"
	for _, h := range sim.fleet.Hosts {
		if h.Name == host && h.User != "" {
			user = h.User
		}
	}
	return &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(testSigner)},
		HostKeyCallback: ssh.FixedHostKey(sim.HostKey(host)),
		Timeout:         5 * time.Second,
	}
}

// dialHost opens an SSH client to a host through the simulator's router.
func dialHost(t *testing.T, sim *Sim, host string) *ssh.Client {
	t.Helper()
	c, err := tryDial(sim, host, clientConfig(sim, host))
	if err != nil {
		t.Fatalf("dial %s: %v", host, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func tryDial(sim *Sim, host string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	var declared string
	for _, h := range sim.fleet.Hosts {
		if h.Name == host {
			declared = h.Addr
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, err := sim.DialContext(ctx, "tcp", declared)
	if err != nil {
		return nil, err
	}
	cc, chans, reqs, err := ssh.NewClientConn(nc, declared, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return ssh.NewClient(cc, chans, reqs), nil
}

// result is what one command returned.
type result struct {
	stdout, stderr string
	code           int
}

// run executes cmd and returns its output and exit status (-1 if none came).
func run(t *testing.T, c *ssh.Client, cmd string) result {
	t.Helper()
	r, err := runErr(c, cmd)
	if err != nil {
		t.Fatalf("run %q: %v", cmd, err)
	}
	return r
}

func runErr(c *ssh.Client, cmd string) (result, error) {
	sess, err := c.NewSession()
	if err != nil {
		return result{}, err
	}
	defer sess.Close()
	var out, errb bytes.Buffer
	sess.Stdout, sess.Stderr = &out, &errb
	err = sess.Run(cmd)
	r := result{stdout: out.String(), stderr: errb.String()}
	var exitErr *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitStatus()
	case errors.As(err, &missing):
		r.code = -1
		return r, err
	default:
		return r, err
	}
	return r, nil
}

func ed25519Key(seed []byte) ed25519.PrivateKey { return ed25519.NewKeyFromSeed(seed) }

// waitFor waits until cond holds, failing the test after five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
