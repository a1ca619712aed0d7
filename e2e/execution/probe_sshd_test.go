package execution_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/remote"
)

// descendants lists every live process below pid.
func descendants(pid int) []int {
	var out []int
	for _, c := range childrenOf(pid) {
		out = append(out, c)
		out = append(out, descendants(c)...)
	}
	return out
}

// Probe against a real OpenSSH server and the machine's own /bin/sh: the framing holds for
// what dash really prints, a probe starts no process under sshd once the shell is up, and a
// timed-out probe's shell is killed and replaced on the same connection.
func TestRealOpenSSHProbeShell(t *testing.T) {
	if _, err := os.Stat(sshdPath); errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s is not installed (make test installs Debian's openssh-server through scripts/test-deps.sh)", sshdPath)
	}
	t.Parallel()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sshd := startSSHD(t, signer.PublicKey(), freePort(t))
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	pool := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: remote.NewMemoryHostKeys(), Logger: zerolog.Nop(),
		DialTimeout: dialTimeout, ProbeShellsPerConn: 1})
	t.Cleanup(pool.Close)
	tgt := remote.Target{Slug: "host:real-sshd", Addr: sshd.addr(), User: u.Username, Kind: remote.KindMachine,
		Wrap: func(c string) (string, error) { return c, nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for _, tc := range []struct {
		cmd, stdout, stderr string
		code                int
	}{
		{`read -r l < /proc/stat && echo "$l" | cut -c1-4`, "cpu \n", "", 0},
		{"printf 'no newline'", "no newline", "", 0},
		{`printf 'q"\\\000\377\n'; echo err >&2`, "q\"\\\x00\xff\n", "err\n", 0},
		{"cat <<'EOF'\n'quoted' $HOME\nEOF\nexit_code() { return 9; }; exit_code", "'quoted' $HOME\n", "", 9},
		{"cat; echo stdin-was-empty", "stdin-was-empty\n", "", 0},
	} {
		res, err := pool.Probe(ctx, tgt, tc.cmd)
		if err != nil || string(res.Stdout) != tc.stdout || string(res.Stderr) != tc.stderr || res.ExitCode != tc.code {
			t.Errorf("%q: stdout %q stderr %q exit %d err %v; want %q %q %d", tc.cmd, res.Stdout, res.Stderr, res.ExitCode, err,
				tc.stdout, tc.stderr, tc.code)
		}
	}

	// The same shell runs every probe: the processes under sshd (its per-connection
	// processes and the one shell) are exactly the same before and after 20 more.
	before := fmt.Sprint(descendants(sshd.cmd.Process.Pid))
	for i := 0; i < 20; i++ {
		if _, err := pool.Probe(ctx, tgt, `read -r l < /proc/loadavg && echo "$l"`); err != nil {
			t.Fatal(err)
		}
	}
	if after := fmt.Sprint(descendants(sshd.cmd.Process.Pid)); after != before {
		t.Errorf("processes under sshd changed: %s before, %s after 20 probes", before, after)
	}

	// A probe that exits the shell fails and the next one gets a new shell.
	if _, err := pool.Probe(ctx, tgt, "exit 4"); !errors.Is(err, remote.ErrProbeShell) || !strings.Contains(err.Error(), "exit status 4") {
		t.Errorf("exit: %v", err)
	}
	// Timeout mid-command: output so far, the shell's process group killed (OpenSSH ignores
	// the signal request for root), the next probe fine on the same connection. The shell is
	// started first: a session can take seconds here (root's .bashrc).
	if _, err := pool.Probe(ctx, tgt, "true"); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	res, err := pool.Probe(short, tgt, "echo partial; sleep 30")
	if !errors.Is(err, context.DeadlineExceeded) || string(res.Stdout) != "partial\n" {
		t.Errorf("timeout: %q %v", res.Stdout, err)
	}
	if res, err := pool.Probe(ctx, tgt, "echo next"); err != nil || string(res.Stdout) != "next\n" {
		t.Errorf("after the timeout: %q %v", res.Stdout, err)
	}
	// The killed shell's process group went with it: no orphaned sleep under sshd (the kill
	// runs in the background, in a session of its own).
	sleeping := func() []int {
		var pids []int
		for _, pid := range descendants(sshd.cmd.Process.Pid) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "sleep" {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for left := sleeping(); len(left) > 0; left = sleeping() {
		select {
		case <-ctx.Done():
			t.Fatalf("the timed-out probe's sleep %v is still running", left)
		case <-tick.C:
		}
	}
	if got := pool.DialCount(sshd.addr()); got != 1 {
		t.Errorf("DialCount %d, want 1", got)
	}
}
