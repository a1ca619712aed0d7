// Package drift compares what the Proxmox hosts run with what the graph says they run
// (docs/behaviours.md S7): `pct list` and `qm list` on every live proxmox-host, over the same SSH
// pool and resolution the checks use, diffed against the graph's lxc and vm entities.
//
//   - missing: a guest a host runs that no entity describes (a test container created behind
//     the graph's back);
//   - ghost: a live entity (not planned, not destroyed) whose guest its host does not run;
//   - unchecked: an entity that could not be compared (its host was unreachable, it has no
//     vmid or no owning host) — neither confirmed nor accused.
//
// Read-only: it runs two listing commands per host and writes only its report. A run is
// scheduled daily and on demand: the api sends NOTIFY oikos_drift with a request id and
// waits for the drift_reports row listing that id. Several requests arriving while a run is
// in progress are answered by the next run together; several schedulers never answer the
// same request twice (the request ids are claimed under an advisory lock).
package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/attr"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Defaults for Options.
const (
	DefaultEvery       = 24 * time.Hour
	DefaultHostTimeout = 30 * time.Second
	DefaultPoll        = time.Hour
)

// hostParallelism is how many hosts are listed at once.
const hostParallelism = 4

// EventReported is appended when a report is stored.
const EventReported = "drift.reported"

// lockClaim serialises claiming requests and scheduled runs across schedulers.
const lockClaim = 0x6f696b6f7310

// Resolver turns a slug into a Target; *fleet.Graph implements it.
type Resolver interface {
	Resolve(ctx context.Context, slugOrID string) (remote.Target, remote.Entity, error)
}

// Executor runs a command on a target; *remote.Pool implements it.
type Executor interface {
	Exec(ctx context.Context, t remote.Target, command string, out io.Writer) (remote.Result, error)
}

// Options configure a Service. Pool, SSH and Fleet are required.
type Options struct {
	Pool  *pgxpool.Pool
	SSH   Executor
	Fleet Resolver
	// Notifier delivers NOTIFY oikos_drift; the handler is registered in New, so build the
	// service before starting the notifier.
	Notifier *eventbus.Notifier
	Logger   zerolog.Logger
	Metrics  prometheus.Registerer // the discovery's metrics (README, Metrics); nil: unregistered
	Clock    func() time.Time
	// Every is how old the latest report may get before a scheduled run (default 24 h).
	Every time.Duration
	// Poll is how often the age of the latest report is checked (default 1 h).
	Poll time.Duration
	// HostTimeout bounds the listing commands on one host (default 30 s).
	HostTimeout time.Duration
	// SchedulerID is recorded as claimed_by (default "<hostname>:<pid>").
	SchedulerID string
}

// Service runs drift discovery. Start once; Stop is safe twice.
type Service struct {
	opts Options
	log  zerolog.Logger
	m    *driftMetrics

	mu      sync.Mutex
	pending []string
	wake    chan struct{}

	life startstop.Lifecycle // the loop
}

// HostReport is what one Proxmox host answered.
type HostReport struct {
	Host      string `json:"host"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	LXC       int    `json:"lxc"`
	VM        int    `json:"vm"`
}

// Missing is a live guest without an entity.
type Missing struct {
	Host string `json:"host"`
	LiveGuest
	Hint string `json:"hint,omitempty"`
	// Config is what pct config / qm config said, for adopting the guest as an entity; nil
	// when it could not be read (ConfigError says why).
	Config      *GuestConfig `json:"config,omitempty"`
	ConfigError string       `json:"config_error,omitempty"`
}

// Ghost is an entity whose guest is not live.
type Ghost struct {
	Entity   string `json:"entity"`
	EntityID string `json:"entity_id"`
	State    string `json:"state"`
	Host     string `json:"host"`
	Kind     string `json:"kind"`
	VMID     int    `json:"vmid"`
	Hint     string `json:"hint,omitempty"`
}

// Unchecked is an entity that could not be compared, and why.
type Unchecked struct {
	Entity string `json:"entity"`
	Reason string `json:"reason"`
}

// Report is one drift discovery.
type Report struct {
	ID         string       `json:"id"`
	Trigger    string       `json:"trigger"`
	RequestIDs []string     `json:"request_ids"`
	StartedAt  time.Time    `json:"started_at"`
	FinishedAt time.Time    `json:"finished_at"`
	Hosts      []HostReport `json:"hosts"`
	Missing    []Missing    `json:"missing"`
	Ghost      []Ghost      `json:"ghost"`
	Unchecked  []Unchecked  `json:"unchecked"`
	Summary    Summary      `json:"summary"`
}

// Summary counts a report.
type Summary struct {
	Hosts            int `json:"hosts"`
	HostsUnreachable int `json:"hosts_unreachable"`
	LiveGuests       int `json:"live_guests"`
	GraphGuests      int `json:"graph_guests"`
	Missing          int `json:"missing"`
	Ghost            int `json:"ghost"`
	Unchecked        int `json:"unchecked"`
}

// New builds the service and registers its NOTIFY handler.
func New(opts Options) (*Service, error) {
	if opts.Pool == nil || opts.SSH == nil || opts.Fleet == nil {
		return nil, errors.New("drift: Pool, SSH and Fleet are required")
	}
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.HostTimeout <= 0 {
		opts.HostTimeout = DefaultHostTimeout
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.SchedulerID == "" {
		h, _ := os.Hostname()
		opts.SchedulerID = h + ":" + strconv.Itoa(os.Getpid())
	}
	s := &Service{opts: opts, log: opts.Logger.With().Str("component", "drift").Logger(), m: newDriftMetrics(opts.Metrics),
		wake: make(chan struct{}, 1)}
	if opts.Notifier != nil {
		opts.Notifier.Listen(eventbus.ChannelDrift, s.onNotify)
	}
	return s, nil
}

// requestPayload is what the api sends on oikos_drift.
type requestPayload struct {
	RequestID string `json:"request_id"`
}

func (s *Service) onNotify(payload string) {
	var p requestPayload
	id := strings.TrimSpace(payload)
	if err := json.Unmarshal([]byte(payload), &p); err == nil && p.RequestID != "" {
		id = p.RequestID
	}
	if _, err := uuid.Parse(id); err != nil {
		s.log.Warn().Str("payload", payload).Msg("oikos_drift notification without a request id; running anyway")
		id = ""
	}
	s.Request(id)
}

// Request asks for a run answering requestID ("" for an anonymous request).
func (s *Service) Request(requestID string) {
	s.mu.Lock()
	s.pending = append(s.pending, requestID)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start runs the loop: requested runs as they come, a scheduled run when the latest report
// is older than Every. Runs left `running` by a scheduler that died are marked failed.
func (s *Service) Start(ctx context.Context) error {
	if _, err := s.opts.Pool.Exec(ctx, `UPDATE drift_reports SET status = 'failed', finished_at = $1,
error = 'interrupted: the scheduler running it stopped' WHERE status = 'running' AND started_at < $2`,
		s.opts.Clock(), s.opts.Clock().Add(-time.Hour)); err != nil {
		return fmt.Errorf("drift: clear interrupted runs: %w", err)
	}
	return s.life.Start(ctx, s.log, "drift", s.loop)
}

// Stop ends the loop, waiting for a run in progress (its context is cancelled). Safe twice,
// and before Start.
func (s *Service) Stop() { s.life.Stop() }

func (s *Service) loop(ctx context.Context) {
	poll := time.NewTimer(time.Minute)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			s.mu.Lock()
			ids := s.pending
			s.pending = nil
			s.mu.Unlock()
			if _, err := s.runRequested(ctx, ids); err != nil && ctx.Err() == nil {
				s.log.Error().Err(err).Msg("requested drift discovery failed")
			}
		case <-poll.C:
			if _, err := s.runIfDue(ctx); err != nil && ctx.Err() == nil {
				s.log.Error().Err(err).Msg("scheduled drift discovery failed")
			}
			poll.Reset(s.opts.Poll)
		}
	}
}

// runRequested claims the request ids no other scheduler has claimed and answers them with
// one run. Anonymous requests ("") always run.
func (s *Service) runRequested(ctx context.Context, ids []string) (*Report, error) {
	var named []string
	anonymous := false
	for _, id := range ids {
		if id == "" {
			anonymous = true
		} else {
			named = append(named, id)
		}
	}
	var reportID string
	var claimed []string
	err := s.claim(ctx, func(tx pgx.Tx) (bool, error) {
		if len(named) > 0 {
			rows, err := tx.Query(ctx, `SELECT DISTINCT unnest(request_ids)::text FROM drift_reports WHERE request_ids && $1::uuid[]`, named)
			if err != nil {
				return false, err
			}
			taken, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return false, err
			}
			done := map[string]bool{}
			for _, t := range taken {
				done[t] = true
			}
			for _, id := range named {
				if !done[id] {
					claimed = append(claimed, id)
				}
			}
		}
		if len(claimed) == 0 && !anonymous {
			return false, nil
		}
		var err error
		reportID, err = s.insertRunning(ctx, tx, "requested", claimed)
		return err == nil, err
	})
	if err != nil || reportID == "" {
		return nil, err
	}
	return s.execute(ctx, reportID, "requested", claimed)
}

// runIfDue runs a scheduled discovery when the newest finished report is older than Every.
func (s *Service) runIfDue(ctx context.Context) (*Report, error) {
	var reportID string
	err := s.claim(ctx, func(tx pgx.Tx) (bool, error) {
		var last *time.Time
		if err := tx.QueryRow(ctx, `SELECT max(coalesce(finished_at, started_at)) FROM drift_reports
WHERE status = 'completed' OR (status = 'running' AND trigger = 'scheduled')`).Scan(&last); err != nil {
			return false, err
		}
		if last != nil && s.opts.Clock().Sub(*last) < s.opts.Every {
			return false, nil
		}
		var err error
		reportID, err = s.insertRunning(ctx, tx, "scheduled", nil)
		return err == nil, err
	})
	if err != nil || reportID == "" {
		return nil, err
	}
	return s.execute(ctx, reportID, "scheduled", nil)
}

// RunNow runs a discovery at once (tests, and callers that want the report in hand).
func (s *Service) RunNow(ctx context.Context) (*Report, error) {
	var reportID string
	err := s.claim(ctx, func(tx pgx.Tx) (bool, error) {
		var err error
		reportID, err = s.insertRunning(ctx, tx, "requested", nil)
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	return s.execute(ctx, reportID, "requested", nil)
}

// claim runs fn under the claim lock, in a transaction that commits what fn wrote (when
// fn finds nothing to claim it writes nothing, and the commit only releases the lock).
func (s *Service) claim(ctx context.Context, fn func(tx pgx.Tx) (bool, error)) error {
	err := pg.InTx(ctx, s.opts.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockClaim)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := fn(tx); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drift: %w", err)
	}
	return nil
}

func (s *Service) insertRunning(ctx context.Context, tx pgx.Tx, trigger string, requestIDs []string) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	if requestIDs == nil {
		requestIDs = []string{}
	}
	_, err = tx.Exec(ctx, `INSERT INTO drift_reports (id, trigger, request_ids, status, started_at, claimed_by)
VALUES ($1, $2, $3::uuid[], 'running', $4, $5)`, id.String(), trigger, requestIDs, s.opts.Clock(), s.opts.SchedulerID)
	return id.String(), err
}

// execute runs the discovery for a claimed row and stores the outcome.
func (s *Service) execute(ctx context.Context, reportID, trigger string, requestIDs []string) (*Report, error) {
	rep, runErr := s.Discover(ctx)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if runErr != nil {
		s.m.runs.WithLabelValues("failed").Inc()
		if _, err := s.opts.Pool.Exec(fctx, `UPDATE drift_reports SET status = 'failed', finished_at = $2, error = $3 WHERE id = $1`,
			reportID, s.opts.Clock(), runErr.Error()); err != nil {
			return nil, errors.Join(runErr, fmt.Errorf("drift: store failure: %w", err))
		}
		return nil, runErr
	}
	rep.ID, rep.Trigger, rep.RequestIDs = reportID, trigger, requestIDs
	if rep.RequestIDs == nil {
		rep.RequestIDs = []string{}
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("drift: marshal report: %w", err)
	}
	err = pg.InTx(fctx, s.opts.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(fctx, `UPDATE drift_reports SET status = 'completed', finished_at = $2, report = $3,
missing_count = $4, ghost_count = $5 WHERE id = $1`, reportID, rep.FinishedAt, raw, len(rep.Missing), len(rep.Ghost)); err != nil {
			return err
		}
		_, err := eventbus.Append(fctx, tx, eventbus.Event{Type: EventReported, Actor: "scheduler"}, map[string]any{
			"report_id": reportID, "trigger": trigger, "missing": len(rep.Missing), "ghost": len(rep.Ghost),
			"unchecked": len(rep.Unchecked), "hosts_unreachable": rep.Summary.HostsUnreachable,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("drift: store report: %w", err)
	}
	s.m.runs.WithLabelValues("completed").Inc()
	s.m.missing.Set(float64(len(rep.Missing)))
	s.m.ghost.Set(float64(len(rep.Ghost)))
	s.log.Info().Int("missing", len(rep.Missing)).Int("ghost", len(rep.Ghost)).Int("unchecked", len(rep.Unchecked)).
		Str("trigger", trigger).Msg("drift discovery stored")
	return rep, nil
}

// graphGuest is an lxc or vm entity.
type graphGuest struct {
	id, slug, name, state, kind string
	attrs                       map[string]any
}

// Discover lists every live Proxmox host's guests and diffs them with the graph. It stores
// nothing (execute does).
func (s *Service) Discover(ctx context.Context) (*Report, error) {
	rep := &Report{StartedAt: s.opts.Clock(), Hosts: []HostReport{}, Missing: []Missing{}, Ghost: []Ghost{}, Unchecked: []Unchecked{}}
	rows, err := s.opts.Pool.Query(ctx, `
WITH RECURSIVE t(name, root) AS (
    SELECT r, r FROM unnest(ARRAY['lxc', 'vm', 'proxmox-host']) AS r
    UNION
    SELECT et.name, t.root FROM entity_types et JOIN t ON et.parent = t.name
)
SELECT e.id::text, e.slug, e.name, e.state, t.root, e.attributes
FROM entities e JOIN t ON t.name = e.type
WHERE e.state <> 'destroyed'
ORDER BY e.slug`)
	if err != nil {
		return nil, fmt.Errorf("drift: read the graph: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (graphGuest, error) {
		var g graphGuest
		err := r.Scan(&g.id, &g.slug, &g.name, &g.state, &g.kind, &g.attrs)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("drift: read the graph: %w", err)
	}
	hostsEdge := map[string]string{} // guest id → host slug
	rows, err = s.opts.Pool.Query(ctx, `SELECT r.target_id::text, e.slug FROM relationships r JOIN entities e ON e.id = r.source_id
WHERE r.type = 'hosts' AND r.valid_to IS NULL AND e.state <> 'destroyed' ORDER BY r.valid_from`)
	if err != nil {
		return nil, fmt.Errorf("drift: read hosts edges: %w", err)
	}
	var gid, hslug string
	if _, err := pgx.ForEachRow(rows, []any{&gid, &hslug}, func() error { hostsEdge[gid] = hslug; return nil }); err != nil {
		return nil, fmt.Errorf("drift: read hosts edges: %w", err)
	}

	var hosts, guests []graphGuest
	hostByName, hostBySlug := map[string]string{}, map[string]bool{}
	notLive := map[string]string{} // host slug → its state, for hosts not listed
	for _, g := range all {
		if g.kind == "proxmox-host" && (g.state == "planned" || g.state == "provisioning") {
			// A host being added has no confirmed host key yet: connecting to it here would
			// trust its key on first use, which onboarding must leave to the operator.
			notLive[g.slug] = g.state
			hostByName[g.name] = g.slug
			continue
		}
		if g.kind == "proxmox-host" {
			hosts = append(hosts, g)
			hostByName[g.name] = g.slug
			hostBySlug[g.slug] = true
		} else {
			guests = append(guests, g)
		}
	}

	// Live side: each host is one connection that the checks already hold open.
	type key struct {
		host, kind string
		vmid       int
	}
	live := map[key]LiveGuest{}
	reachable := map[string]bool{}
	// Hosts are listed a few at a time, so one hanging host costs HostTimeout once, not
	// once per host after it.
	type listing struct {
		lxc, vms []LiveGuest
		err      error
	}
	listings := make([]listing, len(hosts))
	sem := make(chan struct{}, hostParallelism)
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		safego.Go(s.log, "drift-list-host", func() {
			defer wg.Done()
			defer func() { <-sem }()
			l := listing{err: fmt.Errorf("listing %s panicked", h.slug)}
			defer func() { listings[i] = l }()
			l.lxc, l.vms, l.err = s.listHost(ctx, h.slug)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for i, h := range hosts {
		hr := HostReport{Host: h.slug}
		if err := listings[i].err; err != nil {
			hr.Error = err.Error()
			rep.Summary.HostsUnreachable++
		} else {
			hr.Reachable = true
			reachable[h.slug] = true
			hr.LXC, hr.VM = len(listings[i].lxc), len(listings[i].vms)
			for _, g := range append(listings[i].lxc, listings[i].vms...) {
				live[key{h.slug, g.Kind, g.VMID}] = g
			}
		}
		rep.Hosts = append(rep.Hosts, hr)
	}

	matched := map[key]bool{}
	for _, g := range guests {
		host := ""
		if a, _ := g.attrs["host"].(string); strings.TrimSpace(a) != "" {
			a = strings.TrimSpace(a)
			if hostBySlug[a] {
				host = a
			} else if slug, ok := hostByName[a]; ok {
				host = slug
			}
		}
		if host == "" {
			host = hostsEdge[g.id]
		}
		vmid, ok := positiveInt(g.attrs["vmid"])
		switch {
		case !ok:
			rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: g.slug, Reason: "no vmid attribute"})
			continue
		case notLive[host] != "":
			rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: g.slug, Reason: "its host " + host + " is " + notLive[host] + ", not live yet"})
			continue
		case host == "" || !hostBySlug[host]:
			rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: g.slug, Reason: "no owning proxmox-host in the graph"})
			continue
		case !reachable[host]:
			rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: g.slug, Reason: "its host " + host + " could not be listed"})
			continue
		}
		k := key{host, g.kind, vmid}
		if _, ok := live[k]; ok {
			matched[k] = true
			continue
		}
		if g.state == "planned" {
			continue // not created yet: nothing to be live
		}
		rep.Ghost = append(rep.Ghost, Ghost{Entity: g.slug, EntityID: g.id, State: g.state, Host: host, Kind: g.kind, VMID: vmid})
	}
	for k, g := range live {
		if matched[k] {
			continue
		}
		rep.Missing = append(rep.Missing, Missing{Host: k.host, LiveGuest: g})
	}
	sort.Slice(rep.Missing, func(i, j int) bool {
		a, b := rep.Missing[i], rep.Missing[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.VMID < b.VMID
	})
	// A guest that moved hosts, or whose kind the graph has wrong, shows up on both sides.
	for i := range rep.Ghost {
		for j := range rep.Missing {
			if rep.Ghost[i].VMID == rep.Missing[j].VMID {
				rep.Ghost[i].Hint = fmt.Sprintf("a %s %d runs on %s: moved, or recorded with the wrong host or kind?",
					rep.Missing[j].Kind, rep.Missing[j].VMID, rep.Missing[j].Host)
				rep.Missing[j].Hint = "possibly " + rep.Ghost[i].Entity
			}
		}
	}
	s.readConfigs(ctx, rep.Missing)
	rep.FinishedAt = s.opts.Clock()
	rep.Summary.Hosts = len(hosts)
	rep.Summary.LiveGuests = len(live)
	rep.Summary.GraphGuests = len(guests)
	rep.Summary.Missing = len(rep.Missing)
	rep.Summary.Ghost = len(rep.Ghost)
	rep.Summary.Unchecked = len(rep.Unchecked)
	return rep, nil
}

// configParallelism is how many pct config / qm config run at once (sessions on the hosts'
// one connection each).
const configParallelism = 8

// readConfigs reads each missing guest's configuration, so adopting it copies what its host
// says (hostname, cores, memory, disk, ostype, onboot, tags). Read-only; a failure is noted
// on the guest and never fails the report.
func (s *Service) readConfigs(ctx context.Context, missing []Missing) {
	sem := make(chan struct{}, configParallelism)
	var wg sync.WaitGroup
	for i := range missing {
		m := &missing[i]
		wg.Add(1)
		sem <- struct{}{}
		safego.Go(s.log, "drift-guest-config", func() {
			defer wg.Done()
			defer func() { <-sem }()
			cmd := fmt.Sprintf("pct config %d", m.VMID)
			if m.Kind == "vm" {
				cmd = fmt.Sprintf("qm config %d", m.VMID)
			}
			cctx, cancel := context.WithTimeout(ctx, s.opts.HostTimeout)
			defer cancel()
			out, err := s.runOn(cctx, m.Host, cmd)
			if err != nil {
				m.ConfigError = err.Error()
				return
			}
			c := ParseGuestConfig(m.Kind, out)
			m.Config = &c
		})
	}
	wg.Wait()
}

// runOn runs a read-only command on a Proxmox host and returns its standard output.
func (s *Service) runOn(ctx context.Context, slug, cmd string) (string, error) {
	t, _, err := s.opts.Fleet.Resolve(ctx, slug)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", slug, err)
	}
	res, err := s.opts.SSH.Exec(ctx, t, cmd, nil)
	if err != nil {
		return "", fmt.Errorf("%s on %s: %w", cmd, slug, err)
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("%s on %s exited %d: %s", cmd, slug, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return string(res.Stdout), nil
}

// listHost runs pct list and qm list on a Proxmox host.
func (s *Service) listHost(ctx context.Context, slug string) (lxc, vms []LiveGuest, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.HostTimeout)
	defer cancel()
	run := func(cmd string) (string, error) { return s.runOn(ctx, slug, cmd) }
	out, err := run("pct list")
	if err != nil {
		return nil, nil, err
	}
	if lxc, err = ParsePctList(out); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", slug, err)
	}
	out, err = run("qm list")
	if err != nil {
		return nil, nil, err
	}
	if vms, err = ParseQmList(out); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", slug, err)
	}
	return lxc, vms, nil
}

// positiveInt reads a vmid-like attribute: a whole number above zero.
func positiveInt(v any) (int, bool) {
	n, err := attr.Int(v)
	return n, err == nil && n > 0
}
