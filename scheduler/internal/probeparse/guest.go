package probeparse

import (
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/remote"
)

// Guest is a proxmox-guest check's parsed config: which guest to ask its owning host about.
type Guest struct {
	VMID int
	Kind string // checks.GuestLXC or checks.GuestVM
	Host string // the owning Proxmox host's slug
	// StoppedOnPurpose: the graph says the guest is meant to be stopped (S11).
	StoppedOnPurpose bool
}

// GuestCommand is `pct status <vmid>` for a container, `qm status <vmid>` for a VM.
func GuestCommand(g Guest) string {
	prog := "pct"
	if g.Kind == checks.GuestVM {
		prog = "qm"
	}
	return prog + " status " + strconv.Itoa(g.VMID)
}

// ParseGuestStatus reads what GuestCommand answered on the owning host: running is up,
// stopped or missing is down, paused (and the like) degraded.
func ParseGuestStatus(g Guest, res remote.Result) results.Result {
	cmd := GuestCommand(g)
	msg := strings.TrimSpace(string(res.Stderr))
	if res.ExitCode != 0 {
		if strings.Contains(msg, "does not exist") {
			out := results.Observed(results.HealthDown, "%s %d does not exist on %s", g.Kind, g.VMID, g.Host)
			out.Summary = map[string]any{"vmid": g.VMID, "host": g.Host, "status": "missing"}
			out.Metrics = []results.Metric{{Name: "guest_running", Value: 0}}
			return out
		}
		return results.Unknown(results.ClassProbe, "%s exited %d on %s: %s", cmd, res.ExitCode, g.Host, Clip(msg, 300))
	}
	status := ""
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "status:"); ok {
			status = strings.TrimSpace(v)
			break
		}
	}
	var out results.Result
	switch status {
	case "running":
		out = results.Observed(results.HealthUp, "%s %d running on %s", g.Kind, g.VMID, g.Host)
	case "stopped":
		if g.StoppedOnPurpose {
			out = results.Observed(results.HealthUp, "%s %d stopped on %s, as intended (expected_status: stopped)", g.Kind, g.VMID, g.Host)
		} else {
			out = results.Observed(results.HealthDown, "%s %d stopped on %s", g.Kind, g.VMID, g.Host)
		}
	case "paused", "suspended", "prelaunch":
		out = results.Observed(results.HealthDegraded, "%s %d %s on %s", g.Kind, g.VMID, status, g.Host)
	case "":
		return results.Unknown(results.ClassParse, "%s printed no status line", cmd)
	default:
		out = results.Unknown(results.ClassProbe, "%s reports status %q", cmd, status)
	}
	running := 0.0
	if status == "running" {
		running = 1
	}
	out.Summary = map[string]any{"vmid": g.VMID, "host": g.Host, "status": status}
	out.Metrics = []results.Metric{{Name: "guest_running", Value: running}}
	return out
}

// Clip trims s and cuts it to n bytes, marking the cut.
func Clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
