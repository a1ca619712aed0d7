package execution_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/remote"
)

const sshdPath = "/usr/sbin/sshd"

// realSSHD is an OpenSSH server started by a test on a loopback port, with its own host key,
// configuration and authorized key in a temporary directory.
type realSSHD struct {
	t    *testing.T
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

func startSSHD(t *testing.T, clientKey ssh.PublicKey, port int) *realSSHD {
	t.Helper()
	dir := t.TempDir()
	s := &realSSHD{t: t, dir: dir, port: port}
	s.writeHostKey()
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientKey), 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	return s
}

// writeHostKey (re)generates the server's host key.
func (s *realSSHD) writeHostKey() {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		s.t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "host_ed25519"), pem.EncodeToMemory(block), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

func (s *realSSHD) start() {
	s.t.Helper()
	u, err := user.Current()
	if err != nil {
		s.t.Fatal(err)
	}
	cfg := strings.Join([]string{
		"ListenAddress 127.0.0.1:" + strconv.Itoa(s.port),
		"HostKey " + filepath.Join(s.dir, "host_ed25519"),
		"AuthorizedKeysFile " + filepath.Join(s.dir, "authorized_keys"),
		"PidFile " + filepath.Join(s.dir, "sshd.pid"),
		"StrictModes no",
		"UsePAM no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin prohibit-password",
		"AllowUsers " + u.Username,
		"LogLevel ERROR",
	}, "\n") + "\n"
	conf := filepath.Join(s.dir, "sshd_config")
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		s.t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// sshd refuses to start as root without its privilege separation directory, which a
		// package install creates only when the service runs.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			s.t.Fatal(err)
		}
	}
	// A file, not a pipe: per-connection children inherit stderr, and Wait would otherwise
	// wait for them too.
	logPath := filepath.Join(s.dir, "sshd.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logFile.Close()
	stderr := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	s.cmd = exec.Command(sshdPath, "-D", "-e", "-f", conf)
	s.cmd.Stderr = logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	s.t.Cleanup(s.stop)
	// Ready when the port accepts a connection; give up if sshd exits or after a deadline.
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("sshd exited: %s", stderr())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("sshd did not listen on %s: %s", s.addr(), stderr())
		}
	}
}

func (s *realSSHD) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// stop ends the server and the per-connection processes it forked (each leads its own
// session, so the process group of the listener does not reach them): as after a reinstall,
// open connections drop and the client has to connect again and meet the host key.
func (s *realSSHD) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	for _, pid := range childrenOf(s.cmd.Process.Pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces, so split after the last ')'.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, n)
		}
	}
	return kids
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Against a real OpenSSH server: a machine-target execution runs with the host key pinned on
// first use; after the server's host key is swapped, the next one is refused and signalled.
func TestRealOpenSSHPinnedHostKey(t *testing.T) {
	if _, err := os.Stat(sshdPath); errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s is not installed (make test installs Debian's openssh-server through scripts/test-deps.sh)", sshdPath)
	}
	t.Parallel()
	l := newLab(t, labOptions{noSim: true})
	sshd := startSSHD(t, l.signer.PublicKey(), freePort(t))
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7()).String()
	if _, err := l.db.Pool.Exec(context.Background(), `INSERT INTO entities (id, slug, type, name, state, attributes)
		VALUES ($1, 'host:real-sshd', 'host', 'real-sshd', 'active', $2)`, id,
		map[string]any{"lan_ipv4": "127.0.0.1", "ssh_port": sshd.port, "user": u.Username, "os": "linux"}); err != nil {
		t.Fatal(err)
	}
	l.ids["host:real-sshd"] = id

	_, r := l.runOnce(execSpec{target: "host:real-sshd", command: `printf 'hello %s\n' "$(id -un)"; printf 'q"\\\000\377\n'`}, 30*time.Second)
	want := fmt.Sprintf("hello %s\nq\"\\\x00\xff\n", u.Username)
	if r.Status != "completed" || string(r.Output) != want {
		t.Fatalf("first run: %+v (output %q, want %q)", r, r.Output, want)
	}
	var pinned []byte
	if err := l.db.Pool.QueryRow(context.Background(), `SELECT public_key FROM ssh_host_keys WHERE address = $1`, sshd.addr()).
		Scan(&pinned); err != nil {
		t.Fatalf("host key not pinned: %v", err)
	}

	// Reinstall: same address, new host key.
	sshd.stop()
	sshd.writeHostKey()
	sshd.start()
	_, r = l.runOnce(execSpec{target: "host:real-sshd", command: "echo should-not-run"}, 30*time.Second)
	if r.Status != "failed" || !strings.Contains(r.Error, "host key for "+sshd.addr()+" changed") ||
		!strings.Contains(r.Error, remote.Fingerprint(pinned)) || len(r.Output) != 0 {
		t.Fatalf("after key swap: %+v (output %q)", r, r.Output)
	}
	assertHostKeySignal(t, l, sshd.addr(), id)
}
