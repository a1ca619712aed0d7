package systemd

import (
	"fmt"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// The services a timer activates (apt-daily.service for apt-daily.timer) are static units
// that run briefly at each elapse and are inactive (dead) in between, as on a real host.

// triggeredBy is the timer that activates a service ("" when none does).
func (t Tools) triggeredBy(service string) string {
	if !strings.HasSuffix(service, ".service") {
		return ""
	}
	timer := strings.TrimSuffix(service, ".service") + ".timer"
	if u, ok := t.M.Unit(timer); ok && u.Active {
		return timer
	}
	return ""
}

// runtime is how long one run of a timer's service takes.
func runtime(service string) time.Duration {
	return time.Duration(3+len(service)%11) * time.Second
}

// unit is the machine's unit, or the static service a running timer activates.
func (t Tools) unit(name string) (state.Unit, bool) {
	if u, ok := t.M.Unit(name); ok {
		return u, true
	}
	timer := t.triggeredBy(name)
	if timer == "" {
		return state.Unit{}, false
	}
	_, last := t.elapses(timer)
	if last.IsZero() {
		return state.Unit{Name: name, Since: t.M.Boot()}, true
	}
	return state.Unit{Name: name, Since: last.Add(runtime(name))}, true
}

// runs are the journal of a timer's service: one start and finish per elapse since boot (the
// last few days of them).
func (t Tools) runs(service, timer string) []entry {
	desc := state.Describe(service)
	s := scheduleOf(timer)
	_, last := t.elapses(timer)
	var es []entry
	for at := last; !at.IsZero() && !at.Before(t.M.Boot()) && len(es) < 3*14; at = at.Add(-s.period) {
		end := at.Add(runtime(service))
		es = append([]entry{
			{at, "systemd", 1, 6, service, fmt.Sprintf("Starting %s - %s...", service, desc)},
			{end, "systemd", 1, 6, service, fmt.Sprintf("%s: Deactivated successfully.", service)},
			{end, "systemd", 1, 6, service, fmt.Sprintf("Finished %s - %s.", service, desc)},
		}, es...)
	}
	return es
}

// triggeredStatus is systemctl status of a timer's service.
func (t Tools) triggeredStatus(w func(format string, a ...any), name, timer string, u state.Unit, lines int) {
	now := t.M.Now()
	w("○ %s - %s\n", name, state.Describe(name))
	w("     Loaded: loaded (%s/%s; static)\n", t.unitDir(), name)
	w("     Active: inactive (dead) since %s; %s ago\n", Stamp(u.Since), Relative(now.Sub(u.Since)))
	w("TriggeredBy: ● %s\n", timer)
	pid := 10000 + int(u.Since.Add(-runtime(name)).Unix()%20000)
	w("    Process: %d ExecStart=/usr/lib/%s (code=exited, status=0/SUCCESS)\n", pid, strings.TrimSuffix(name, ".service"))
	w("   Main PID: %d (code=exited, status=0/SUCCESS)\n", pid)
	w("        CPU: %dms\n", 100+pid%900)
	if lines > 0 {
		w("\n")
		for _, e := range lastN(t.runs(name, timer), lines) {
			w("%s\n", e.short(t.M.Hostname(), false))
		}
	}
}
