package execution_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim"
)

// A read-only run through the LXC hop completes with its output, timing from the claim and
// the started/completed events.
func TestReadOnlyRunCompletes(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	id, r := l.runOnce(execSpec{target: "lxc:jellyfin", command: "echo hello; hostname"}, 20*time.Second)
	if r.Status != "completed" || r.ExitCode == nil || *r.ExitCode != 0 || string(r.Output) != "hello\njellyfin\n" {
		t.Fatalf("row = %+v (output %q)", r, r.Output)
	}
	if r.Started == nil || r.Finished == nil || r.Finished.Before(*r.Started) || r.ClaimedBy != "scheduler-a" {
		t.Errorf("timing/claim = %v %v %q", r.Started, r.Finished, r.ClaimedBy)
	}
	if out, _ := l.logs(id); string(out) != "hello\njellyfin\n" {
		t.Errorf("logged output = %q", out)
	}
	if r.Result["hop"] != "lxc" || r.Result["via"] != "proxmox-host:atlas" || r.Result["exit_code"] != float64(0) {
		t.Errorf("result = %v", r.Result)
	}
	if got := joined(l.events(id)); got != "execution.started,execution.completed" {
		t.Errorf("events = %s", got)
	}
}

// A non-zero exit is failed with its exit code and output.
func TestNonZeroExitFails(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	_, r := l.runOnce(execSpec{target: "host:hermes", command: "echo oops >&2; exit 3"}, 20*time.Second)
	if r.Status != "failed" || r.ExitCode == nil || *r.ExitCode != 3 || string(r.Output) != "oops\n" ||
		!strings.Contains(r.Error, "status 3") {
		t.Errorf("row = %+v (output %q)", r, r.Output)
	}
}

// A command that outlives its timeout ends timed_out with the output it printed first.
func TestTimeoutKeepsPartialOutput(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	begin := time.Now()
	id, r := l.runOnce(execSpec{target: "lxc:jellyfin", command: "echo start; sleep 30", timeout: 1}, 20*time.Second)
	if r.Status != "timed_out" || r.ExitCode != nil || string(r.Output) != "start\n" || !strings.Contains(r.Error, "timed out after 1s") {
		t.Fatalf("row = %+v (output %q)", r, r.Output)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("took %s for a 1 s timeout", took)
	}
	out, system := l.logs(id)
	if string(out) != "start\n" || !strings.Contains(string(system), "timed_out") {
		t.Errorf("logs = %q / %q", out, system)
	}
	if got := joined(l.events(id)); got != "execution.started,execution.timed_out" {
		t.Errorf("events = %s", got)
	}
}

// Output with quotes, backslashes, NUL bytes and invalid UTF-8 is stored byte for byte, both
// directly and through the pct exec hop.
func TestOutputRoundTripsByteExact(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	cmd := `printf '%s\n' 'a "quoted" \ back\slash $HOME'; printf 'nul:\000:ff:\377:fe:\376:end\n'`
	want := []byte("a \"quoted\" \\ back\\slash $HOME\nnul:\x00:ff:\xff:fe:\xfe:end\n")
	for _, target := range []string{"host:hermes", "lxc:caddy"} {
		id, r := l.runOnce(execSpec{target: target, command: cmd}, 20*time.Second)
		if r.Status != "completed" || !bytes.Equal(r.Output, want) {
			t.Errorf("%s: status %s error %q output %q", target, r.Status, r.Error, r.Output)
		}
		if out, _ := l.logs(id); !bytes.Equal(out, want) {
			t.Errorf("%s: logs %q", target, out)
		}
	}
}

// A VM is reached through qm guest exec; its own exit code and output come back.
func TestVMThroughGuestAgent(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	_, r := l.runOnce(execSpec{target: "vm:homeassistant", command: "echo from-vm; hostname; exit 4"}, 20*time.Second)
	if r.Status != "failed" || r.ExitCode == nil || *r.ExitCode != 4 || string(r.Output) != "from-vm\nhomeassistant\n" {
		t.Errorf("row = %+v (output %q)", r, r.Output)
	}
	if r.Result["hop"] != "vm" {
		t.Errorf("result = %v", r.Result)
	}
	// The guest agent stops answering: a clear failure, not a hang.
	if err := l.sim.SetGuestFault("atlas", 150, labsim.Fault{GuestAgentDown: true}); err != nil {
		t.Fatal(err)
	}
	_, r = l.runOnce(execSpec{target: "vm:homeassistant", command: "true"}, 20*time.Second)
	if r.Status != "failed" || !strings.Contains(r.Error, "guest agent") {
		t.Errorf("agent down: %+v", r)
	}
}

// An LXC with no `host` attribute is reached through its hosts edge (lxc:ntfy on ceres).
func TestLXCWithoutHostAttributeUsesEdge(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	_, r := l.runOnce(execSpec{target: "lxc:ntfy", command: "hostname"}, 20*time.Second)
	if r.Status != "completed" || string(r.Output) != "ntfy\n" || r.Result["via"] != "proxmox-host:ceres" {
		t.Errorf("row = %+v (output %q)", r, r.Output)
	}
}

// A host that is down fails within the dial timeout, saying it is unreachable.
func TestHostDownFailsWithinDialTimeout(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	if err := l.sim.SetHostFault("boreas", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	_, r := l.runOnce(execSpec{target: "lxc:nextcloud", command: "uptime"}, 20*time.Second)
	if r.Status != "failed" || !strings.Contains(r.Error, "host unreachable") || !strings.Contains(r.Error, "127.0.10.2:2222") {
		t.Fatalf("row = %+v", r)
	}
	if took := r.Finished.Sub(*r.Started); took > dialTimeout+time.Second {
		t.Errorf("failed after %s; the dial timeout is %s", took, dialTimeout)
	}
}

// A changed host key is refused, and raised as a critical signal on the host with an event.
func TestChangedHostKeyRefusedAndSignalled(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	if _, r := l.runOnce(execSpec{target: "proxmox-host:ceres", command: "true"}, 20*time.Second); r.Status != "completed" {
		t.Fatalf("first contact: %+v", r)
	}
	if err := l.sim.SetHostFault("ceres", labsim.Fault{ChangedHostKey: true}); err != nil {
		t.Fatal(err)
	}
	_, r := l.runOnce(execSpec{target: "lxc:unbound", command: "true"}, 20*time.Second)
	if r.Status != "failed" || !strings.Contains(r.Error, "host key for 127.0.10.3:2222 changed") {
		t.Fatalf("row = %+v", r)
	}
	assertHostKeySignal(t, l, "127.0.10.3:2222", l.ids["proxmox-host:ceres"])
}

func assertHostKeySignal(t *testing.T, l *lab, addr, entityID string) {
	t.Helper()
	var severity, status string
	var entity *string
	if err := l.db.Pool.QueryRow(t.Context(), `SELECT severity, status, entity_id::text FROM signals
		WHERE kind = 'host_key_changed' AND dedup_key = $1`, "host_key_changed:"+addr).Scan(&severity, &status, &entity); err != nil {
		t.Fatalf("no host_key_changed signal for %s: %v", addr, err)
	}
	if severity != "critical" || status != "open" || (entityID != "" && (entity == nil || *entity != entityID)) {
		t.Errorf("signal = %s %s entity %v", severity, status, entity)
	}
	var n int
	// One signal.raised per opening (shared/signals), with the signal's standard payload.
	if err := l.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE type = 'signal.raised' AND payload->>'dedup_key' = $1`,
		"host_key_changed:"+addr).Scan(&n); err != nil || n != 1 {
		t.Errorf("signal.raised events = %d, %v; want 1", n, err)
	}
}

// Stopping the executor mid-run cancels the command and records it interrupted with the
// output it had printed; a new executor does not run it again.
func TestStopMidRunKeepsOutputAndInterrupts(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{noExecutor: true})
	ex := l.startExecutor("scheduler-a", 0)
	id := l.submit(execSpec{target: "lxc:radarr", command: "echo before; sleep 60"})
	l.waitFor(id, 30*time.Second, func(r execRow) bool {
		out, _ := l.logs(id)
		return string(out) == "before\n"
	})
	begin := time.Now()
	ex.Stop()
	ex.Stop()
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("Stop took %s", took)
	}
	r := l.row(id)
	if r.Status != "interrupted" || string(r.Output) != "before\n" || !strings.Contains(r.Error, "stopped while the command was running") {
		t.Fatalf("row = %+v (output %q)", r, r.Output)
	}
	l.startExecutor("scheduler-b", 0)
	_, later := l.runOnce(execSpec{target: "lxc:radarr", command: "true"}, 30*time.Second)
	if later.Status != "completed" || l.row(id).Status != "interrupted" {
		t.Errorf("after restart: later %s, interrupted one %s", later.Status, l.row(id).Status)
	}
	if got := joined(l.events(id)); got != "execution.started,execution.interrupted" {
		t.Errorf("events = %s", got)
	}
}

// stdout and stderr are logged under their own streams, directly and through the pct exec
// hop; the output tail holds both.
func TestStderrLoggedApart(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	cmd := `echo out; echo err >&2`
	for _, target := range []string{"host:hermes", "lxc:caddy"} {
		id, r := l.runOnce(execSpec{target: target, command: cmd}, 20*time.Second)
		if r.Status != "completed" {
			t.Fatalf("%s: status %s error %q", target, r.Status, r.Error)
		}
		if !bytes.Contains(r.Output, []byte("out\n")) || !bytes.Contains(r.Output, []byte("err\n")) {
			t.Errorf("%s: output tail %q lacks a stream", target, r.Output)
		}
		rows, err := l.db.Pool.Query(context.Background(), `SELECT stream, string_agg(convert_from(data, 'UTF8'), '' ORDER BY seq)
			FROM execution_logs WHERE execution_id = $1 AND stream <> 'system' GROUP BY stream ORDER BY stream`, id)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var stream, data string
			if err := rows.Scan(&stream, &data); err != nil {
				t.Fatal(err)
			}
			got[stream] = data
		}
		rows.Close()
		if got["stdout"] != "out\n" || got["stderr"] != "err\n" || len(got) != 2 {
			t.Errorf("%s: logged streams %q, want stdout \"out\\n\" and stderr \"err\\n\"", target, got)
		}
	}
}
