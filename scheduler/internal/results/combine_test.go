package results

import (
	"strings"
	"testing"
	"time"
)

func TestCombineTakesTheWorst(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	st := func(slug, health, reason string, obs *time.Time) checkState {
		return checkState{Slug: slug, Kind: "ssh-script", Health: health, Reason: reason, At: t1, ObservedAt: obs}
	}
	tests := []struct {
		name       string
		states     []checkState
		health     string
		reasonHas  string
		lastCheck  *time.Time
		setByCount int
	}{
		{"all up", []checkState{st("check:lxc.a.ssh-script.cpu", "up", "cpu 3%", &t0), st("check:lxc.a.proxmox-guest", "up", "", &t1)},
			"up", "all 2 checks up", &t1, 2},
		{"a stopped container is down although cpu cannot tell",
			[]checkState{st("check:lxc.a.ssh-script.cpu", "down", "container 101 is not running", &t1),
				st("check:lxc.a.proxmox-guest", "down", "lxc 101 stopped", &t1),
				st("check:lxc.a.ssh-script.disk", "unknown", "timeout", nil)},
			"down", "proxmox-guest: lxc 101 stopped", &t1, 2},
		{"degraded beats unknown", []checkState{st("c:x.disk", "degraded", "disk 93%", &t0), st("c:x.cpu", "unknown", "timeout", nil)},
			"degraded", "disk 93%", &t0, 1},
		{"unknown beats up", []checkState{st("c:x.cpu", "up", "", &t0), st("c:x.mem", "unknown", "Proxmox host proxmox-host:atlas unreachable", nil)},
			"unknown", "proxmox-host:atlas", &t0, 1},
		{"nothing observed", []checkState{st("c:x.cpu", "unknown", "unreachable", nil)}, "unknown", "unreachable", nil, 1},
		{"no checks", nil, "unknown", "no enabled check", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := combine(tc.states)
			if c.Health != tc.health {
				t.Fatalf("health %q, want %q", c.Health, tc.health)
			}
			if !strings.Contains(c.Reason, tc.reasonHas) {
				t.Errorf("reason %q lacks %q", c.Reason, tc.reasonHas)
			}
			if (c.LastCheckAt == nil) != (tc.lastCheck == nil) || (c.LastCheckAt != nil && !c.LastCheckAt.Equal(*tc.lastCheck)) {
				t.Errorf("last_check_at %v, want %v", c.LastCheckAt, tc.lastCheck)
			}
			if got := len(c.Summary["set_by"].([]string)); got != tc.setByCount {
				t.Errorf("set_by %v", c.Summary["set_by"])
			}
		})
	}
}
