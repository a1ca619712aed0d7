package execution_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim"
)

// atlasAnswers makes 192.0.2.1 the one gateway that answers ping from atlas.
func atlasAnswers(f *labsim.Fleet) {
	for i := range f.Hosts {
		if f.Hosts[i].Name == "atlas" {
			f.Hosts[i].Gateways = []string{"192.0.2.1"}
		}
	}
}

// A template missing from the host's cache is replaced by the newest cached Debian one;
// DHCP is the default; privileged 0 and nesting "1" arrive as an agent sends them.
func TestPctCreateMissingTemplatePicksNewestDebian(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{fleet: atlasAnswers})
	id, r := l.runOnce(execSpec{target: "proxmox-host:atlas", action: "pct_create",
		params: map[string]any{"vmid": 190, "hostname": "web", "template": "debian-13-standard_13.0-1_amd64.tar.zst",
			"privileged": 0, "nesting": "1", "cores": 2, "memory_mb": 1024}}, 30*time.Second)
	if r.Status != "completed" {
		t.Fatalf("row = %+v", r)
	}
	want := map[string]any{"vmid": float64(190), "hostname": "web", "template": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
		"template_auto_picked": true, "ip": "dhcp", "host": "proxmox-host:atlas", "privileged": false, "nesting": true}
	for k, v := range want {
		if r.Result[k] != v {
			t.Errorf("result[%s] = %v, want %v (result %v)", k, r.Result[k], v, r.Result)
		}
	}
	if _, system := l.logs(id); !strings.Contains(string(system), "is not in the cache") || !strings.Contains(string(system), "$ pct start 190") {
		t.Errorf("system log = %q", system)
	}
	if st, err := l.sim.GuestStatus("atlas", 190); err != nil || st != "running" {
		t.Errorf("guest 190: %q, %v", st, err)
	}
	_, cfg := l.runOnce(execSpec{target: "proxmox-host:atlas", command: "pct config 190"}, 20*time.Second)
	for _, line := range []string{"hostname: web", "unprivileged: 1", "features: nesting=1", "ip=dhcp", "cores: 2", "memory: 1024"} {
		if !strings.Contains(string(cfg.Output), line) {
			t.Errorf("pct config lacks %q:\n%s", line, cfg.Output)
		}
	}
}

// A static address whose gateway does not answer from the host fails within seconds with the
// do-not-guess message, and nothing is created.
func TestPctCreateStaticSilentGatewayFailsFast(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{fleet: atlasAnswers})
	_, r := l.runOnce(execSpec{target: "proxmox-host:atlas", action: "pct_create",
		params: map[string]any{"vmid": 191, "hostname": "web2", "ip": "192.0.2.60/24", "gw": "192.0.2.254"}}, 30*time.Second)
	wantErr := "gateway 192.0.2.254 did not answer from proxmox-host:atlas; do not guess another address — ask the operator"
	if r.Status != "failed" || r.Error != wantErr {
		t.Fatalf("row = %+v", r)
	}
	if took := r.Finished.Sub(*r.Started); took > 6*time.Second {
		t.Errorf("took %s to give up on the gateway", took)
	}
	if st, err := l.sim.GuestStatus("atlas", 191); err == nil {
		t.Errorf("container 191 exists (%s) after a failed pre-flight", st)
	}

	// The gateway that answers is used as given.
	_, r = l.runOnce(execSpec{target: "proxmox-host:atlas", action: "pct_create",
		params: map[string]any{"vmid": 192, "hostname": "web3", "ip": "192.0.2.61/24", "gw": "192.0.2.1", "bridge": "vmbr0",
			"template": "local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst"}}, 30*time.Second)
	if r.Status != "completed" || r.Result["ip"] != "192.0.2.61/24" || r.Result["gw"] != "192.0.2.1" ||
		r.Result["template"] != "local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst" || r.Result["template_auto_picked"] != false {
		t.Fatalf("static with a live gateway: %+v", r)
	}
	_, cfg := l.runOnce(execSpec{target: "proxmox-host:atlas", command: "pct config 192"}, 20*time.Second)
	if !strings.Contains(string(cfg.Output), "ip=192.0.2.61/24,gw=192.0.2.1") {
		t.Errorf("pct config 192:\n%s", cfg.Output)
	}
}

// Without a vmid, pct_create asks the cluster for the next free one (pvesh get
// /cluster/nextid) and creates the container under it.
func TestPctCreateWithoutVMIDTakesNextID(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{fleet: atlasAnswers})
	_, next := l.runOnce(execSpec{target: "proxmox-host:atlas", command: "pvesh get /cluster/nextid --output-format json"}, 20*time.Second)
	want, err := strconv.Atoi(strings.Trim(strings.TrimSpace(string(next.Output)), `"`))
	if next.Status != "completed" || err != nil || want < 100 {
		t.Fatalf("nextid: %+v (%v)", next, err)
	}
	_, r := l.runOnce(execSpec{target: "proxmox-host:atlas", action: "pct_create",
		params: map[string]any{"hostname": "auto"}}, 30*time.Second)
	if r.Status != "completed" || r.Result["vmid"] != float64(want) {
		t.Fatalf("row = %+v, want vmid %d", r, want)
	}
	if st, err := l.sim.GuestStatus("atlas", want); err != nil || st != "running" {
		t.Errorf("guest %d: %q, %v", want, st, err)
	}
}
