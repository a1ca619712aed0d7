// Package discover proposes service entities for a machine or guest from what runs on it,
// and creates the ones an operator accepts (issue 16: `oikos discover services lxc:NAME`).
//
// Discovery asks for two read-only executions on the target through the one gated path
// (api/internal/execution, as POST /api/v1/executions does): UnitsCommand lists the running
// systemd service units and ListenersCommand the listening TCP sockets with their processes.
// The gate classifies both as read_only, so they run at once without an approval; the
// scheduler's executor runs them through the host-hop (pct exec for an LXC, qm guest exec
// for a VM, SSH for a machine). Discovery waits for both (bounded), reads their standard
// output, leaves out base-OS plumbing (IsPlumbing), assigns ports to units by process name
// (Match) and answers one proposal per unit, saying whether a service entity for it already
// runs on the target. It writes nothing of its own: the executions are the record of what it
// ran, and their ids are in the answer.
//
// Accepting creates the service entities and their runs-on edges in one transaction through
// the graph service's bulk path (the one seed ingest uses: validation, an audit row and an
// event per change), derives their checks (a `unit` gives the process check), and skips
// services that already run on the target.
//
// Errors are the api's (apierr) or the execution gate's; a discovery whose executions failed
// or did not finish in time is a *Failure, which the HTTP surface answers as 502 or 504.
package discover

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage/fleetstore"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Bounds of a discovery's wait.
const (
	DefaultTimeout = 60 * time.Second
	MinTimeout     = time.Second
	MaxTimeout     = 10 * time.Minute
	// maxStdout bounds what is read of one command's standard output.
	maxStdout = 4 << 20
	// serviceType is the type accepted services get; runsOn the edge to their machine.
	serviceType = "service"
	runsOn      = "runs-on"
)

// Options configure a Service.
type Options struct {
	// Executions is the gated execution path discovery asks through.
	Executions *execution.Service
	// Graph is the mutation path accepted services are created through.
	Graph *graph.Service
	// Bus, when given, wakes a discovery's wait as soon as an execution ends; without it the
	// wait re-reads every Poll.
	Bus    *eventbus.Bus
	Logger zerolog.Logger
	// Poll is how often a wait re-reads its executions without a wake-up (default 1 s
	// without a Bus, 5 s with one, as a safety net).
	Poll time.Duration
}

// Service runs discoveries and accepts their proposals. It is safe for concurrent use.
type Service struct {
	exec  *execution.Service
	graph *graph.Service
	store *fleetstore.Store
	bus   *eventbus.Bus
	poll  time.Duration
	log   zerolog.Logger
}

// New builds a Service.
func New(o Options) (*Service, error) {
	if o.Executions == nil || o.Graph == nil {
		return nil, errors.New("discover: the execution and graph services are required")
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
		if o.Bus != nil {
			o.Poll = 5 * time.Second
		}
	}
	return &Service{exec: o.Executions, graph: o.Graph, store: fleetstore.New(o.Graph.Pool()), bus: o.Bus, poll: o.Poll,
		log: o.Logger.With().Str("component", "discover").Logger()}, nil
}

// Proposal is one running unit proposed as a service entity.
type Proposal struct {
	// Name is the proposed service name: the unit without .service, or, when a service of
	// that name already runs elsewhere, the name with the target's name appended (Note says
	// so).
	Name        string `json:"name"`
	Unit        string `json:"unit"`
	Description string `json:"description"`
	// Ports are the TCP ports the unit's processes listen on (see Match), ascending.
	Ports []int `json:"ports"`
	// Port is the proposed `port` attribute: the lowest port beyond loopback, else the
	// lowest; null without ports.
	Port *int `json:"port"`
	// Exists: a service entity for this unit (by unit or name) already runs on the target;
	// Entity is its slug. Accepting it again creates nothing.
	Exists bool   `json:"exists"`
	Entity string `json:"entity,omitempty"`
	// Note explains a proposed name that is not the unit's.
	Note string `json:"note,omitempty"`
}

// Ran is one execution a discovery asked for.
type Ran struct {
	ID      string `json:"id"`
	Command string `json:"command"`
	Status  string `json:"status"`
}

// Discovery is what a discovery found on its target.
type Discovery struct {
	Target    string     `json:"target"`
	Proposals []Proposal `json:"proposals"`
	// Plumbing are the running units left out as base-OS plumbing (IsPlumbing).
	Plumbing []string `json:"plumbing"`
	// Unmatched are listening sockets whose process matches no proposed unit.
	Unmatched []Listener `json:"unmatched_listeners"`
	// Executions are the two executions discovery ran, for the audit trail.
	Executions []Ran `json:"executions"`
}

// Failure is a discovery whose executions failed, or did not finish in time: nothing was
// proposed. Code says which (CodeGuestNotRunning, CodeExecutionFailed, CodeTimeout).
type Failure struct {
	Code   string
	Reason string
	// Executions are the ids concerned.
	Executions []string
}

// Failure codes.
const (
	CodeGuestNotRunning = "guest_not_running"
	CodeExecutionFailed = "execution_failed"
	CodeTimeout         = "timeout"
)

// Error implements error.
func (f *Failure) Error() string { return f.Reason }

// Unwrap makes a failure an apierr.ErrConflict for a caller that does not map it itself (the
// HTTP surface answers 502 and 504).
func (f *Failure) Unwrap() error { return apierr.ErrConflict }

// checkTarget refuses what discovery cannot run on: anything but a machine or a guest.
func (s *Service) checkTarget(e graph.Entity) error {
	o := s.graph.Ontology()
	if o.IsA(e.Type, "machine") || o.IsA(e.Type, "guest") {
		return nil
	}
	return apierr.Invalid("ref", "%s is a %s: services are discovered on a machine or a guest (lxc, vm, host, proxmox-host, ...)",
		e.Slug, e.Type)
}

// Propose runs the discovery on the entity ref names (slug or id), waiting up to timeout
// (DefaultTimeout when 0) for its two executions. m is who asks (the executions are
// requested in their name).
func (s *Service) Propose(ctx context.Context, m graph.Meta, ref string, timeout time.Duration) (Discovery, error) {
	switch {
	case timeout == 0:
		timeout = DefaultTimeout
	case timeout < MinTimeout || timeout > MaxTimeout:
		return Discovery{}, apierr.Invalid("timeout", "must be from %s to %s", MinTimeout, MaxTimeout)
	}
	t, err := s.graph.GetEntity(ctx, ref)
	if err != nil {
		return Discovery{}, err
	}
	if err := s.checkTarget(t); err != nil {
		return Discovery{}, err
	}
	cmds := []string{UnitsCommand, ListenersCommand}
	// Both must be read-only under the policy in force (an operator's policy may be
	// stricter): discovery never asks for anything an operator would have to approve.
	for _, c := range cmds {
		cl, err := s.exec.Classify(ctx, execution.ClassifyRequest{Command: c, Target: t.Slug})
		if err != nil {
			return Discovery{}, err
		}
		if cl.Refusal != nil {
			return Discovery{}, &execution.RefusedError{Code: cl.Refusal.Code, Reason: cl.Refusal.Reason, RiskClass: cl.RiskClass}
		}
		if !cl.ReadOnly || cl.ApprovalRequired {
			return Discovery{}, &execution.RefusedError{Code: "not_read_only", RiskClass: cl.RiskClass,
				Reason: fmt.Sprintf("discovery runs only read-only commands, and the policy classifies %q as %s (%s); nothing was asked",
					c, cl.RiskClass, strings.Join(cl.Reasons, "; "))}
		}
	}
	var sub *eventbus.Subscription
	if s.bus != nil {
		// Subscribed before asking, so no end is missed between the request and the wait.
		sub = s.bus.Subscribe(64, "execution.completed", "execution.failed", "execution.timed_out", "execution.interrupted")
		defer sub.Close()
	}
	em := execution.Meta{Actor: m.Actor, Role: m.Role, Method: m.Method, Path: m.Path}
	secs := int(math.Ceil(timeout.Seconds()))
	var ids []string
	for i, c := range cmds {
		what := "list the running systemd units"
		if i == 1 {
			what = "list the listening TCP ports"
		}
		e, err := s.exec.Request(ctx, em, execution.Request{Target: t.Slug, Action: execution.ActionRun, Command: c,
			Purpose:        fmt.Sprintf("oikos discover services %s: %s (read-only; proposes service entities)", t.Slug, what),
			TimeoutSeconds: secs})
		if err != nil {
			return Discovery{}, err
		}
		if e.Status != execution.StatusApproved {
			return Discovery{}, &Failure{Code: CodeExecutionFailed, Executions: []string{e.ID},
				Reason: fmt.Sprintf("execution %s of %q is %s instead of running at once; discovery stopped", e.ID, c, e.Status)}
		}
		ids = append(ids, e.ID)
	}
	done, err := s.wait(ctx, t.Slug, ids, timeout, sub)
	if err != nil {
		return Discovery{}, err
	}
	d := Discovery{Target: t.Slug, Proposals: []Proposal{}, Plumbing: []string{}, Unmatched: []Listener{}}
	for i, id := range ids {
		e := done[id]
		d.Executions = append(d.Executions, Ran{ID: id, Command: cmds[i], Status: e.Status})
		if f := failureOf(t.Slug, e); f != nil {
			return Discovery{}, f
		}
	}
	unitsOut, err := s.stdout(ctx, ids[0])
	if err != nil {
		return Discovery{}, err
	}
	listenOut, err := s.stdout(ctx, ids[1])
	if err != nil {
		return Discovery{}, err
	}
	var units []Unit
	for _, u := range ParseUnits(unitsOut) {
		if IsPlumbing(u.Name) {
			d.Plumbing = append(d.Plumbing, u.Name)
			continue
		}
		units = append(units, u)
	}
	listeners := ParseListeners(listenOut)
	owned, unmatched := Match(units, listeners)
	// A plumbing unit's sockets (sshd's 22, postfix's 25) are not unmatched: only those no
	// running unit at all explains are.
	var plumbUnits []Unit
	for _, p := range d.Plumbing {
		plumbUnits = append(plumbUnits, Unit{Name: p})
	}
	_, unexplained := Match(plumbUnits, unmatched)
	d.Unmatched = append(d.Unmatched, unexplained...)

	st, err := s.readState(ctx, s.store, t, candidateSlugs(units, t.Name))
	if err != nil {
		return Discovery{}, err
	}
	for _, u := range units {
		p := Proposal{Unit: u.Name, Description: u.Description, Ports: Ports(owned[u.Name])}
		if mp := MainPort(owned[u.Name]); mp > 0 {
			p.Port = &mp
		}
		p.Name, p.Exists, p.Entity, p.Note = st.propose(u.Name, t.Name)
		d.Proposals = append(d.Proposals, p)
	}
	return d, nil
}

// failureOf is the Failure of an execution that did not complete, or nil.
func failureOf(target string, e execution.Execution) *Failure {
	if e.Status == execution.StatusCompleted {
		return nil
	}
	tail := ""
	if e.Output != nil {
		tail = lastBytes(strings.TrimSpace(*e.Output), 400)
	}
	why := e.Error
	if tail != "" {
		why = strings.TrimSpace(why + "; output: " + tail)
	}
	f := &Failure{Code: CodeExecutionFailed, Executions: []string{e.ID}}
	switch {
	case strings.Contains(strings.ToLower(e.Error+" "+tail), "not running"):
		f.Code = CodeGuestNotRunning
		f.Reason = fmt.Sprintf("%s is not running, so nothing was discovered (execution %s %s: %s); start it and discover again",
			target, e.ID, e.Status, why)
	case e.Status == execution.StatusTimedOut:
		f.Code = CodeTimeout
		f.Reason = fmt.Sprintf("execution %s (%s) on %s timed out: %s", e.ID, e.Command, target, why)
	default:
		f.Reason = fmt.Sprintf("execution %s (%s) on %s ended %s: %s; is %s reachable? oikos executions tail %s shows its output",
			e.ID, e.Command, target, e.Status, why, target, e.ID)
	}
	return f
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	// Start at a rune boundary.
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return "…" + s[i:]
		}
	}
	return "…" + s
}

// wait blocks until every execution of ids is terminal, or timeout passes (a Failure naming
// those still going), or ctx ends. It re-reads on every end the bus reports and every poll.
func (s *Service) wait(ctx context.Context, target string, ids []string, timeout time.Duration, sub *eventbus.Subscription) (map[string]execution.Execution, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	var woken <-chan eventbus.Event
	if sub != nil {
		woken = sub.C
	}
	done := map[string]execution.Execution{}
	for {
		for _, id := range ids {
			if _, ok := done[id]; ok {
				continue
			}
			e, err := s.exec.Get(ctx, id)
			if err != nil {
				return nil, err
			}
			if execution.Terminal(e.Status) {
				done[id] = e
			}
		}
		if len(done) == len(ids) {
			return done, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			var going []string
			for _, id := range ids {
				if _, ok := done[id]; !ok {
					going = append(going, id)
				}
			}
			return nil, &Failure{Code: CodeTimeout, Executions: going,
				Reason: fmt.Sprintf("discovery on %s: execution %s did not finish within %s (is a scheduler running, and %s reachable?); "+
					"it goes on until its own timeout: oikos executions tail %s", target, strings.Join(going, ", "), timeout, target, going[0])}
		case <-tick.C:
		case <-woken:
		}
	}
}

// stdout reads an execution's standard output from its stored log (the output tail mixes in
// stderr and the executor's own lines), up to maxStdout.
func (s *Service) stdout(ctx context.Context, id string) (string, error) {
	var b strings.Builder
	after := 0
	for {
		l, err := s.exec.Logs(ctx, id, after, 1000)
		if err != nil {
			return "", err
		}
		for _, c := range l.Chunks {
			if c.Stream == "stdout" && b.Len() < maxStdout {
				b.Write(c.Data)
			}
		}
		if l.Done || len(l.Chunks) == 0 || b.Len() >= maxStdout {
			return b.String(), nil
		}
		after = l.NextSeq
	}
}
