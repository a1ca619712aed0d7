package remote

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The pool's Exec against a fake Proxmox host: the canned answers are what
// docs/proxmox.md says pct and qm print.
func TestExecThroughHostHop(t *testing.T) {
	t.Parallel()
	guestJSON := "{\n   \"err-data\" : \"warn\\n\",\n   \"exitcode\" : 3,\n   \"exited\" : 1,\n   \"out-data\" : \"website-edge\\n\",\n   \"out-truncated\" : 0\n}\n"
	f := newFixture(t, map[string]canned{
		"pct exec 101 -- sh -c 'cat /etc/hostname'":         {stdout: "jellyfin\n"},
		"pct exec 101 -- sh -c 'exit 7'":                    {code: 7},
		"qm guest exec 200 --timeout 600 -- sh -c hostname": {stdout: guestJSON},
		"qm guest exec 200 --timeout 600 -- sh -c 'sleep 900'": {
			stdout: "{\n   \"pid\" : 4242\n}\n", stderr: "timeout reached, returning pid\n"},
		"qm guest exec 201 --timeout 600 -- sh -c hostname": {stderr: "QEMU guest agent is not running\n", code: 255},
		"qm guest exec 202 --timeout 600 -- sh -c hostname": {stderr: "VM 202 is not running\n", code: 255},
		"qm guest exec 203 --timeout 600 -- sh -c hostname": {stdout: "garbage"},
	}, nil)
	host, port, _ := strings.Cut(f.srv.addr, ":")
	g := testGraph()
	atlas := g.entities["proxmox-host:atlas"]
	atlas.Attributes = map[string]any{"lan_ipv4": host, "ssh_port": port}
	g.entities["proxmox-host:atlas"] = atlas
	r := &Resolver{Graph: g, IsA: testIsA}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resolve := func(e Entity) Target {
		t.Helper()
		tgt, err := r.Resolve(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		return tgt
	}
	lxc := resolve(ent("lxc", "jellyfin", map[string]any{"vmid": 101, "host": "atlas"}))
	vm := func(id int) Target {
		return resolve(ent("vm", "v", map[string]any{"vmid": id, "host": "atlas", "qemu_guest_agent": true}))
	}

	t.Run("lxc streams and keeps the command's exit code", func(t *testing.T) {
		out := &syncBuffer{}
		res, err := f.pool.Exec(ctx, lxc, "cat /etc/hostname", out)
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "jellyfin\n" || out.String() != "jellyfin\n" {
			t.Fatalf("res %+v out %q err %v", res, out.String(), err)
		}
		res, err = f.pool.Exec(ctx, lxc, "exit 7", nil)
		if err != nil || res.ExitCode != 7 {
			t.Fatalf("exit code: res %+v err %v", res, err)
		}
	})
	t.Run("vm decodes qm's JSON", func(t *testing.T) {
		out := &syncBuffer{}
		res, err := f.pool.Exec(ctx, vm(200), "hostname", out)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 3 || string(res.Stdout) != "website-edge\n" || string(res.Stderr) != "warn\n" {
			t.Errorf("res %+v", res)
		}
		if out.String() != "website-edge\nwarn\n" {
			t.Errorf("streamed %q, want the decoded output", out.String())
		}
		if res.Duration <= 0 {
			t.Errorf("no duration")
		}
	})
	t.Run("vm timeout form", func(t *testing.T) {
		_, err := f.pool.Exec(ctx, vm(200), "sleep 900", nil)
		if !errors.Is(err, ErrGuestTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrGuestTimeout and DeadlineExceeded", err)
		}
	})
	t.Run("vm agent not running", func(t *testing.T) {
		res, err := f.pool.Exec(ctx, vm(201), "hostname", nil)
		if !errors.Is(err, ErrNoGuestAgent) || !strings.Contains(err.Error(), "QEMU guest agent is not running") {
			t.Fatalf("err = %v", err)
		}
		if res.ExitCode != 255 {
			t.Errorf("qm's own exit code lost: %d", res.ExitCode)
		}
	})
	t.Run("vm not running", func(t *testing.T) {
		_, err := f.pool.Exec(ctx, vm(202), "hostname", nil)
		if !errors.Is(err, ErrGuestExec) || errors.Is(err, ErrNoGuestAgent) || !strings.Contains(err.Error(), "VM 202 is not running") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("vm garbage answer", func(t *testing.T) {
		res, err := f.pool.Exec(ctx, vm(203), "hostname", nil)
		if !errors.Is(err, ErrGuestExec) || string(res.Stdout) != "garbage" {
			t.Fatalf("err = %v, raw answer %q", err, res.Stdout)
		}
	})
	t.Run("unresolved target", func(t *testing.T) {
		if _, err := f.pool.Exec(ctx, Target{Slug: "lxc:x", Addr: f.srv.addr}, "true", nil); err == nil {
			t.Fatal("Exec without Wrap succeeded")
		}
	})

	if got := f.pool.DialCount(f.srv.addr); got != 1 {
		t.Errorf("DialCount = %d, want 1 for all guests of one host", got)
	}
	_, _, cmds := f.srv.stats()
	for _, c := range cmds {
		if !strings.HasPrefix(c, "pct exec ") && !strings.HasPrefix(c, "qm guest exec ") {
			t.Errorf("guest command reached the host unwrapped: %q", c)
		}
	}
}
