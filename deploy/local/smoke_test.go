package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestMakeUpSmoke runs `oikos-local up` as an operator would (the binary behind `make up`),
// waits until the three daemons answer /healthz against the private cluster, sends SIGTERM,
// and checks that no process it started, Postgres included, is left running.
func TestMakeUpSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every daemon; skipped with -short")
	}
	if c, err := net.DialTimeout("tcp", "127.0.10.1:2222", 200*time.Millisecond); err == nil {
		c.Close()
		t.Skip("the demo fleet's addresses are in use (is `make up` running?)")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	for name, pkg := range map[string]string{
		"oikos-api": "./api/cmd/oikos-api", "oikos-scheduler": "./scheduler/cmd/oikos-scheduler",
		"oikos-agent": "./agent/cmd/oikos-agent", "labsim": "./testkit/cmd/labsim", "oikos-local": "./deploy/cmd/oikos-local",
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	if err := os.Symlink(filepath.Join(repo, "seeds"), filepath.Join(root, "seeds")); err != nil {
		t.Fatal(err)
	}
	apiAddr, schAddr, agtAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OIKOS_") && !strings.HasPrefix(kv, "LABSIM_") {
			env = append(env, kv)
		}
	}
	env = append(env, "OIKOS_API_ADDR="+apiAddr, "OIKOS_SCHEDULER_ADDR="+schAddr, "OIKOS_AGENT_ADDR="+agtAddr,
		"LABSIM_CONTROL="+freeAddr(t))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	up := exec.CommandContext(ctx, filepath.Join(bin, "oikos-local"), "up")
	up.Dir, up.Env = root, env
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	up.Stderr = up.Stdout
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	defer up.Process.Kill()
	ready := make(chan struct{})
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		signalled := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !signalled && strings.HasPrefix(sc.Text(), "Oikos is up.") {
				signalled = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatalf("stack did not come up:\n%s", log.String())
	}
	for name, addr := range map[string]string{"api": apiAddr, "scheduler": schAddr, "agent": agtAddr} {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("%s /healthz: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s /healthz answered %d", name, resp.StatusCode)
		}
	}
	pids := readPIDs(t, filepath.Join(root, ".local", "pids"))
	for _, want := range []string{"postgres", "labsim", "oikos-api", "oikos-scheduler", "oikos-agent"} {
		if pids[want] == 0 {
			t.Fatalf("pids file lacks %s: %v", want, pids)
		}
	}
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- up.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("oikos-local exited with %v after SIGTERM:\n%s", err, log.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("oikos-local did not stop within 90s of SIGTERM")
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after SIGTERM: %v", name, pid, err)
		}
	}
}

func readPIDs(t *testing.T, file string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var name string
		var pid int
		if _, err := fmt.Sscanf(line, "%s %d", &name, &pid); err != nil {
			t.Fatalf("pids line %q: %v", line, err)
		}
		out[name] = pid
	}
	return out
}
