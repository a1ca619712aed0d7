package execution_test

import (
	"strings"
	"testing"
	"time"
)

// The typed actions other than pct_create build their command from params, quote every
// value and run through the same hop as `run`.
func TestTypedActions(t *testing.T) {
	t.Parallel()
	l := newLab(t, labOptions{})
	for _, c := range []struct {
		name   string
		spec   execSpec
		status string
		output string // exact, when set
		errHas string
	}{
		{"restart", execSpec{target: "lxc:jellyfin", action: "restart", params: map[string]any{"unit": "jellyfin.service"}}, "completed", "", ""},
		{"active after restart", execSpec{target: "lxc:jellyfin", action: "systemctl", params: map[string]any{"verb": "is-active", "unit": "jellyfin.service"}},
			"completed", "active\n", ""},
		{"stop", execSpec{target: "lxc:jellyfin", action: "systemctl", params: map[string]any{"verb": "stop", "unit": "jellyfin.service"}}, "completed", "", ""},
		{"inactive after stop", execSpec{target: "lxc:jellyfin", action: "systemctl", params: map[string]any{"verb": "is-active", "unit": "jellyfin.service"}},
			"failed", "inactive\n", "status 3"},
		{"unknown verb refused", execSpec{target: "lxc:jellyfin", action: "systemctl", params: map[string]any{"verb": "isolate", "unit": "rescue.target"}},
			"failed", "", "not one of the supported verbs"},
		{"restart without unit", execSpec{target: "lxc:jellyfin", action: "restart"}, "failed", "", "params.unit is required"},
		{"pct_exec on the lxc", execSpec{target: "lxc:sonarr", action: "pct_exec", params: map[string]any{"command": "hostname"}}, "completed", "sonarr\n", ""},
		{"pct_exec on its host", execSpec{target: "proxmox-host:atlas", action: "pct_exec", params: map[string]any{"vmid": 102, "command": "hostname"}},
			"completed", "sonarr\n", ""},
		{"apt_upgrade", execSpec{target: "host:hermes", action: "apt_upgrade"}, "completed", "", ""},
		{"docker_exec", execSpec{target: "lxc:docker-host", action: "docker_exec", params: map[string]any{"container": "uptime-kuma", "command": "echo hi from the container"}},
			"completed", "hi from the container\n", ""},
		{"docker_exec unknown container", execSpec{target: "lxc:docker-host", action: "docker_exec", params: map[string]any{"container": "nope", "command": "true"}},
			"failed", "", "status 1"},
	} {
		_, r := l.runOnce(c.spec, 30*time.Second)
		if r.Status != c.status || (c.output != "" && string(r.Output) != c.output) || !strings.Contains(r.Error, c.errHas) {
			t.Errorf("%s: status %s error %q output %q; want %s %q %q", c.name, r.Status, r.Error, r.Output, c.status, c.errHas, c.output)
		}
	}
}
