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
// Read-only: it runs two listing commands per host (and `pct config` / `qm config` for each
// missing guest) and writes only its report. A run is scheduled daily and on demand: the api
// sends NOTIFY oikos_drift with a request id and waits for the drift_reports row listing that
// id. Several requests arriving while a run is in progress are answered by the next run
// together; several schedulers never answer the same request twice (the request ids are
// claimed under an advisory lock).
//
// With several schedulers each host is listed by the holder of its lease (S9), through its
// one connection: the scheduler running a report announces it (NOTIFY oikos_drift_list with
// the report id), every scheduler lists the hosts it holds into drift_listings, fenced by the
// lease's generation, and the runner diffs the listings with the graph.
//
// Clusters (cluster.go). Proxmox hosts that are member-of a cluster entity are not listed one
// by one: one `pvesh get /cluster/resources --output-format json` through any live member
// answers for every node and every guest of the cluster, so a sweep costs one command per
// cluster instead of two per node, and it says where each guest runs now. The listing is
// taken by the holder of a member's lease, through that member's one connection, and stored
// under the cluster's slug fenced by that member's lease generation: the rule that every
// command to a host goes through the holder of its lease (S9) stays true, and no new lease
// unit is needed (a cluster's leases move with its nodes'). The holder of the first member
// lists at once, trying its other members when one does not answer; a scheduler holding only
// later members waits clusterTakeover for that listing before trying its own, so one
// scheduler down or cut off from its node does not leave the cluster unlisted. The runner
// could have listed the cluster itself through any member, but it would then open a second
// connection to a host another scheduler holds.
//
// A guest the cluster places on another node than the graph's host is `moved` (the api's
// placement follower, api/internal/placement, moves its hosts edge); a guest the cluster
// still lists on a node that is down keeps its last known placement and is unchecked, never
// a ghost. Besides the daily discovery, a placement sweep (trigger "placement", every
// PlacementEvery and at once after a migration ran through Oikos: PlacementNow) lists only
// the clusters, without reading configurations, and announces drift.placement only when
// something moved.
package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/leases"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/attr"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Defaults for Options.
const (
	DefaultEvery       = 24 * time.Hour
	DefaultHostTimeout = 30 * time.Second
	DefaultPoll        = time.Hour
	DefaultPlacement   = time.Minute
)

// hostParallelism is how many hosts are listed at once.
const hostParallelism = 4

// EventReported is appended when a report is stored.
const EventReported = "drift.reported"

// EventPlacement is appended when a placement sweep found guests that moved.
const EventPlacement = "drift.placement"

// TriggerPlacement is the trigger of a placement sweep's report.
const TriggerPlacement = "placement"

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
	Pool  *storage.Pool
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
	// SchedulerID is recorded as claimed_by and as the lister of the hosts this scheduler
	// holds (default "<hostname>:<pid>").
	SchedulerID string
	// Lease, when set, says whether this scheduler holds a unit now and at which generation
	// (leases.Manager.Lease): a host is listed only by its holder, through its holder's one
	// connection. Nil: this scheduler lists every host.
	Lease func(unit string) (int64, bool)
	// ListWait is how long a run waits, from its announcement, for the schedulers' listings
	// before reporting a host unlisted (default HostTimeout + 10 s: a listing, configurations
	// included, takes at most HostTimeout).
	ListWait time.Duration
	// PlacementEvery is how often the clusters alone are listed so the graph follows guests
	// that moved (default 60 s; negative: never, PlacementNow only).
	PlacementEvery time.Duration
}

// Service runs drift discovery. Start once; Stop is safe twice.
type Service struct {
	opts Options
	log  zerolog.Logger
	m    *driftMetrics

	mu      sync.Mutex
	pending []string
	wake    chan struct{}
	// Reports whose held hosts are to be listed (announced by whichever scheduler runs
	// them), and when each host listing here began, by "report/host" (kept listingMemory, so
	// a repeated announcement lists nothing twice).
	toList  []string
	listNow chan struct{}
	listing map[string]time.Time
	// placeNow asks for a placement sweep at once (PlacementNow).
	placeNow chan struct{}

	life startstop.Lifecycle // the loop
}

// HostReport is what one Proxmox host answered.
type HostReport struct {
	Host      string `json:"host"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	LXC       int    `json:"lxc"`
	VM        int    `json:"vm"`
	// Scheduler is the one that listed the host: the holder of its lease (for a cluster
	// member, of the member the cluster was listed through).
	Scheduler string `json:"scheduler,omitempty"`
	// Cluster is the cluster entity the host is a member of; its guests were read from the
	// cluster's listing, and Reachable says whether the cluster reports the node online.
	Cluster string `json:"cluster,omitempty"`
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
	// Node and Cluster say where a cluster reports the guest: the Proxmox node's name and the
	// cluster entity. Host is "" when that node is not in the graph.
	Node    string `json:"node,omitempty"`
	Cluster string `json:"cluster,omitempty"`
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
	// Moved are guests whose cluster runs them on another node than the graph's host.
	Moved []Moved `json:"moved"`
	// Clusters are the clusters listed, with their nodes as the cluster reports them.
	Clusters []ClusterReport `json:"clusters"`
	Summary  Summary         `json:"summary"`
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
	Moved            int `json:"moved"`
	Clusters         int `json:"clusters"`
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
	if opts.ListWait <= 0 {
		opts.ListWait = opts.HostTimeout + 10*time.Second
	}
	if opts.PlacementEvery == 0 {
		opts.PlacementEvery = DefaultPlacement
	}
	// A short schedule (tests, a lab) is looked at more often than hourly.
	opts.Poll = min(opts.Poll, opts.Every)
	if opts.SchedulerID == "" {
		h, _ := os.Hostname()
		opts.SchedulerID = h + ":" + strconv.Itoa(os.Getpid())
	}
	s := &Service{opts: opts, log: opts.Logger.With().Str("component", "drift").Logger(), m: newDriftMetrics(opts.Metrics),
		wake: make(chan struct{}, 1), listNow: make(chan struct{}, 1), placeNow: make(chan struct{}, 1), listing: map[string]time.Time{}}
	if opts.Notifier != nil {
		opts.Notifier.Listen(eventbus.ChannelDrift, s.onNotify)
		opts.Notifier.Listen(eventbus.ChannelDriftList, s.onListRequest)
	}
	return s, nil
}

// requestPayload is what the api sends on oikos_drift.
type requestPayload struct {
	RequestID string `json:"request_id"`
}

// listPayload is what a scheduler running a report sends on oikos_drift_list: every
// scheduler lists the hosts it holds for it.
type listPayload struct {
	ReportID string `json:"report_id"`
}

func (s *Service) onListRequest(payload string) {
	var l listPayload
	if err := json.Unmarshal([]byte(payload), &l); err != nil || uuid.Validate(l.ReportID) != nil {
		s.log.Warn().Str("payload", payload).Msg("oikos_drift_list request without a valid report id; ignored")
		return
	}
	s.mu.Lock()
	if !slices.Contains(s.toList, l.ReportID) {
		s.toList = append(s.toList, l.ReportID)
	}
	s.mu.Unlock()
	select {
	case s.listNow <- struct{}{}:
	default:
	}
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

// db is the service's storage.
func (s *Service) db() *storage.Store { return storage.New(s.opts.Pool) }

// Start runs the loop: requested runs as they come, a scheduled run when the latest report
// is older than Every. Runs left `running` by a scheduler that died are marked failed.
func (s *Service) Start(ctx context.Context) error {
	if err := s.db().FailInterruptedDrift(ctx, s.opts.Clock(), s.opts.Clock().Add(-time.Hour)); err != nil {
		return fmt.Errorf("drift: clear interrupted runs: %w", err)
	}
	return s.life.Start(ctx, s.log, "drift", s.loop)
}

// Stop ends the loop, waiting for a run in progress (its context is cancelled). Safe twice,
// and before Start.
func (s *Service) Stop() { s.life.Stop() }

func (s *Service) loop(ctx context.Context) {
	// Listing for another scheduler's report goes on while this one runs its own.
	var lists sync.WaitGroup
	lists.Add(1)
	safego.Go(s.log, "drift-listings", func() {
		defer lists.Done()
		s.listLoop(ctx)
	})
	defer lists.Wait()
	poll := time.NewTimer(min(time.Minute, s.opts.Poll))
	defer poll.Stop()
	var placement <-chan time.Time
	if s.opts.PlacementEvery > 0 {
		t := time.NewTicker(s.opts.PlacementEvery)
		defer t.Stop()
		placement = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-placement:
			if _, err := s.runPlacement(ctx, false); err != nil && ctx.Err() == nil {
				s.log.Error().Err(err).Msg("placement sweep failed")
			}
		case <-s.placeNow:
			if _, err := s.runPlacement(ctx, true); err != nil && ctx.Err() == nil {
				s.log.Error().Err(err).Msg("placement sweep failed")
			}
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

// listLoop answers listing requests: the held hosts of each report announced.
func (s *Service) listLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.listNow:
		}
		s.mu.Lock()
		ids := s.toList
		s.toList = nil
		s.mu.Unlock()
		for _, id := range ids {
			s.listHeld(ctx, id)
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
	err := s.claim(ctx, func(tx *storage.Store) (bool, error) {
		if len(named) > 0 {
			taken, err := tx.TakenDriftRequests(ctx, named)
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
	err := s.claim(ctx, func(tx *storage.Store) (bool, error) {
		last, err := tx.LastDriftReport(ctx)
		if err != nil {
			return false, err
		}
		if last != nil && s.opts.Clock().Sub(*last) < s.opts.Every {
			return false, nil
		}
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
	err := s.claim(ctx, func(tx *storage.Store) (bool, error) {
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
func (s *Service) claim(ctx context.Context, fn func(tx *storage.Store) (bool, error)) error {
	err := s.db().InTxWaitLock(ctx, int64(lockClaim), func(tx *storage.Store) error {
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

func (s *Service) insertRunning(ctx context.Context, tx *storage.Store, trigger string, requestIDs []string) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	if requestIDs == nil {
		requestIDs = []string{}
	}
	err = tx.InsertDriftReport(ctx, id.String(), trigger, requestIDs, s.opts.Clock(), s.opts.SchedulerID)
	return id.String(), err
}

// execute runs the discovery for a claimed row and stores the outcome.
func (s *Service) execute(ctx context.Context, reportID, trigger string, requestIDs []string) (*Report, error) {
	rep, runErr := s.discover(ctx, reportID, trigger == TriggerPlacement)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if runErr != nil {
		s.m.runs.WithLabelValues("failed").Inc()
		if err := s.db().FailDriftReport(fctx, reportID, s.opts.Clock(), runErr.Error()); err != nil {
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
	err = s.db().InTx(fctx, func(tx *storage.Store) error {
		if err := tx.CompleteDriftReport(fctx, reportID, rep.FinishedAt, raw, len(rep.Missing), len(rep.Ghost)); err != nil {
			return err
		}
		if trigger == TriggerPlacement {
			if len(rep.Moved) == 0 {
				return nil // nothing for the graph to follow: a sweep a minute stays silent
			}
			_, err := tx.AppendEvent(fctx, eventbus.Event{Type: EventPlacement, Actor: "scheduler"}, map[string]any{
				"report_id": reportID, "moved": len(rep.Moved)})
			return err
		}
		_, err := tx.AppendEvent(fctx, eventbus.Event{Type: EventReported, Actor: "scheduler"}, map[string]any{
			"report_id": reportID, "trigger": trigger, "missing": len(rep.Missing), "ghost": len(rep.Ghost),
			"unchecked": len(rep.Unchecked), "hosts_unreachable": rep.Summary.HostsUnreachable, "moved": len(rep.Moved),
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("drift: store report: %w", err)
	}
	if trigger == TriggerPlacement {
		s.m.placements.Inc()
		if len(rep.Moved) > 0 {
			s.log.Info().Int("moved", len(rep.Moved)).Msg("placement sweep found moved guests")
		}
		return rep, nil
	}
	s.m.runs.WithLabelValues("completed").Inc()
	s.m.missing.Set(float64(len(rep.Missing)))
	s.m.ghost.Set(float64(len(rep.Ghost)))
	s.log.Info().Int("missing", len(rep.Missing)).Int("ghost", len(rep.Ghost)).Int("unchecked", len(rep.Unchecked)).
		Str("trigger", trigger).Msg("drift discovery stored")
	return rep, nil
}

// graphGuest is an lxc or vm entity, or a Proxmox host.
type graphGuest struct {
	id, slug, name, state, kind string
	attrs                       map[string]any
}

// graphView is what the graph says the Proxmox hosts run.
type graphView struct {
	hosts, guests []graphGuest      // live hosts; guests not destroyed
	hostsEdge     map[string]string // guest id → host slug
	hostByName    map[string]string // host name → slug, live or not
	hostBySlug    map[string]bool   // live hosts
	notLive       map[string]string // host slug → its state, for hosts not listed
	// Clusters: cluster slug → its live member hosts (by slug), host slug → its cluster;
	// hosts not in clusterOf are standalone and listed with pct list / qm list.
	clusters  map[string][]string
	clusterOf map[string]string
}

// readGraph reads the Proxmox hosts and their guests.
func (s *Service) readGraph(ctx context.Context) (*graphView, error) {
	rows, err := s.db().DriftEntities(ctx)
	if err != nil {
		return nil, fmt.Errorf("drift: read the graph: %w", err)
	}
	all := make([]graphGuest, len(rows))
	for i, r := range rows {
		all[i] = graphGuest{id: r.ID, slug: r.Slug, name: r.Name, state: r.State, kind: r.Kind, attrs: r.Attrs}
	}
	g := &graphView{hostByName: map[string]string{}, hostBySlug: map[string]bool{},
		notLive: map[string]string{}, clusters: map[string][]string{}, clusterOf: map[string]string{}}
	g.hostsEdge, err = s.db().HostSlugByGuest(ctx)
	if err != nil {
		return nil, fmt.Errorf("drift: read hosts edges: %w", err)
	}
	for _, e := range all {
		switch {
		case e.kind == "proxmox-host" && (e.state == "planned" || e.state == "provisioning"):
			// A host being added has no confirmed host key yet: connecting to it here would
			// trust its key on first use, which onboarding must leave to the operator.
			g.notLive[e.slug] = e.state
			g.hostByName[e.name] = e.slug
		case e.kind == "proxmox-host":
			g.hosts = append(g.hosts, e)
			g.hostByName[e.name] = e.slug
			g.hostBySlug[e.slug] = true
		default:
			g.guests = append(g.guests, e)
		}
	}
	members, err := s.db().ClusterMembers(ctx)
	if err != nil {
		return nil, fmt.Errorf("drift: read cluster members: %w", err)
	}
	for _, m := range members {
		if g.hostBySlug[m.Host] && g.clusterOf[m.Host] == "" { // a host in two clusters: the first
			g.clusters[m.Cluster] = append(g.clusters[m.Cluster], m.Host)
			g.clusterOf[m.Host] = m.Cluster
		}
	}
	return g, nil
}

// hostListing is one Proxmox host's answer, as its lease holder stores it in drift_listings:
// what runs there, and the configuration of each guest there that the graph does not know.
type hostListing struct {
	LXC   []LiveGuest `json:"lxc"`
	VMs   []LiveGuest `json:"vms"`
	Error string      `json:"error,omitempty"`
	// Configs by configKey; each a config or why it could not be read.
	Configs   map[string]configResult `json:"configs,omitempty"`
	Scheduler string                  `json:"-"` // who listed it (drift_listings.scheduler_id)
	// Cluster is set on a cluster's listing (stored under the cluster's slug).
	Cluster *clusterListing `json:"cluster,omitempty"`
}

type configResult struct {
	Config *GuestConfig `json:"config,omitempty"`
	Error  string       `json:"error,omitempty"`
}

func configKey(kind string, vmid int) string { return kind + "/" + strconv.Itoa(vmid) }

// diff compares the listings (by host slug for a standalone host, by cluster slug for a
// cluster; one without a listing is unreachable) with the graph. placementOnly: only the
// clusters were listed, and only their members and guests are compared.
func (g *graphView) diff(listings map[string]hostListing, rep *Report, placementOnly bool) {
	type key struct {
		host, kind string
		vmid       int
	}
	live := map[key]LiveGuest{}
	reachable := map[string]bool{}
	compared := 0
	for _, h := range g.hosts {
		if g.clusterOf[h.slug] != "" || placementOnly {
			continue // a cluster's members are reported with its listing (clusterDiff)
		}
		hr := HostReport{Host: h.slug}
		l, ok := listings[h.slug]
		hr.Scheduler = l.Scheduler
		switch {
		case !ok:
			hr.Error = "not listed"
			rep.Summary.HostsUnreachable++
		case l.Error != "":
			hr.Error = l.Error
			rep.Summary.HostsUnreachable++
		default:
			hr.Reachable = true
			reachable[h.slug] = true
			hr.LXC, hr.VM = len(l.LXC), len(l.VMs)
			for _, lg := range append(slices.Clone(l.LXC), l.VMs...) {
				live[key{h.slug, lg.Kind, lg.VMID}] = lg
			}
		}
		rep.Hosts = append(rep.Hosts, hr)
	}
	cd := g.clusterDiff(listings, rep)

	matched := map[key]bool{}
	for _, e := range g.guests {
		host := g.hostOf(e)
		vmid, ok := positiveInt(e.attrs["vmid"])
		if placementOnly && (host == "" || g.clusterOf[host] == "") {
			continue
		}
		compared++
		switch {
		case !ok:
			rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: e.slug, Reason: "no vmid attribute"})
			continue
		case g.notLive[host] != "":
			rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: e.slug, Reason: "its host " + host + " is " + g.notLive[host] + ", not live yet"})
			continue
		case host == "" || !g.hostBySlug[host]:
			rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: e.slug, Reason: "no owning proxmox-host in the graph"})
			continue
		case g.clusterOf[host] != "":
			cd.compare(e, host, vmid, rep)
			continue
		case !reachable[host]:
			rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: e.slug, Reason: "its host " + host + " could not be listed"})
			continue
		}
		k := key{host, e.kind, vmid}
		if _, ok := live[k]; ok {
			matched[k] = true
			continue
		}
		if e.state == "planned" {
			continue // not created yet: nothing to be live
		}
		rep.Ghost = append(rep.Ghost, Ghost{Entity: e.slug, EntityID: e.id, State: e.state, Host: host, Kind: e.kind, VMID: vmid})
	}
	for k, lg := range live {
		if matched[k] {
			continue
		}
		m := Missing{Host: k.host, LiveGuest: lg}
		if c, ok := listings[k.host].Configs[configKey(lg.Kind, lg.VMID)]; ok {
			m.Config, m.ConfigError = c.Config, c.Error
		}
		rep.Missing = append(rep.Missing, m)
	}
	rep.Missing = append(rep.Missing, cd.missing(listings)...)
	sort.Slice(rep.Missing, func(i, j int) bool {
		a, b := rep.Missing[i], rep.Missing[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.VMID < b.VMID
	})
	sort.Slice(rep.Moved, func(i, j int) bool { return rep.Moved[i].Slug < rep.Moved[j].Slug })
	// A guest that moved hosts, or whose kind the graph has wrong, shows up on both sides.
	for i := range rep.Ghost {
		for j := range rep.Missing {
			if rep.Ghost[i].VMID == rep.Missing[j].VMID {
				where := rep.Missing[j].Host
				if where == "" {
					where = "node " + rep.Missing[j].Node + " of " + rep.Missing[j].Cluster
				}
				rep.Ghost[i].Hint = fmt.Sprintf("a %s %d runs on %s: moved, or recorded with the wrong host or kind?",
					rep.Missing[j].Kind, rep.Missing[j].VMID, where)
				rep.Missing[j].Hint = "possibly " + rep.Ghost[i].Entity
			}
		}
	}
	rep.Summary.Hosts = len(rep.Hosts)
	rep.Summary.LiveGuests = len(live) + cd.liveGuests
	rep.Summary.GraphGuests = compared
	rep.Summary.Missing = len(rep.Missing)
	rep.Summary.Ghost = len(rep.Ghost)
	rep.Summary.Unchecked = len(rep.Unchecked)
	rep.Summary.Moved = len(rep.Moved)
	rep.Summary.Clusters = len(rep.Clusters)
}

// hostOf is the proxmox-host a guest entity runs on by the graph: its host attribute (a
// slug or a host's name) or else its current hosts edge; "" when neither names a host.
func (g *graphView) hostOf(e graphGuest) string {
	if a, _ := e.attrs["host"].(string); strings.TrimSpace(a) != "" {
		a = strings.TrimSpace(a)
		if g.hostBySlug[a] {
			return a
		} else if slug, ok := g.hostByName[a]; ok {
			return slug
		}
	}
	return g.hostsEdge[e.id]
}

// discover answers the report reportID: it asks every scheduler to list the Proxmox hosts
// and clusters it holds (NOTIFY oikos_drift_list with the report id), lists its own, waits
// for every live host's or cluster's listing, and diffs them with the graph. It stores
// nothing (execute does). placementOnly: only the clusters.
func (s *Service) discover(ctx context.Context, reportID string, placementOnly bool) (*Report, error) {
	rep := &Report{StartedAt: s.opts.Clock(), Hosts: []HostReport{}, Missing: []Missing{}, Ghost: []Ghost{}, Unchecked: []Unchecked{},
		Moved: []Moved{}, Clusters: []ClusterReport{}}
	deadline := time.Now().Add(s.opts.ListWait)
	s.announce(ctx, reportID)
	s.listHeld(ctx, reportID)
	listings, err := s.awaitListings(ctx, reportID, deadline, placementOnly)
	if err != nil {
		return nil, err
	}
	// The graph is read after the listings, so a guest adopted meanwhile is not missing.
	g, err := s.readGraph(ctx)
	if err != nil {
		return nil, err
	}
	g.diff(listings, rep, placementOnly)
	rep.FinishedAt = s.opts.Clock()
	return rep, nil
}

// announce asks every scheduler (this one too) to list the hosts it holds for reportID, on
// a channel of its own (a scheduler from before it ignores it rather than run a report).
func (s *Service) announce(ctx context.Context, reportID string) {
	payload, err := json.Marshal(listPayload{ReportID: reportID})
	if err == nil {
		err = s.db().Notify(ctx, eventbus.ChannelDriftList, string(payload))
	}
	if err != nil && ctx.Err() == nil {
		s.log.Warn().Err(err).Str("report", reportID).Msg("ask the schedulers for drift listings")
	}
}

// units are what a report waits for: every standalone live Proxmox host (not in a placement
// sweep) and every cluster, each with the hosts whose lease holders could list it.
func (g *graphView) units(placementOnly bool) map[string][]string {
	out := map[string][]string{}
	for _, h := range g.hosts {
		if g.clusterOf[h.slug] == "" && !placementOnly {
			out[h.slug] = []string{h.slug}
		}
	}
	for c, members := range g.clusters {
		out[c] = members
	}
	return out
}

// awaitListings waits until every unit (standalone host or cluster) has a listing for
// reportID, asking again every announceEvery (a scheduler that just took a host's lease, or
// missed the notification), and gives up on the others at deadline (ListWait after the
// announcement), naming their holders.
func (s *Service) awaitListings(ctx context.Context, reportID string, deadline time.Time, placementOnly bool) (map[string]hostListing, error) {
	again := time.Now().Add(announceEvery)
	g, err := s.readGraph(ctx)
	if err != nil {
		return nil, err
	}
	for {
		listings, err := s.readListings(ctx, reportID)
		if err != nil {
			return nil, err
		}
		var waiting []string
		units := g.units(placementOnly)
		for u := range units {
			if _, ok := listings[u]; !ok {
				waiting = append(waiting, u)
			}
		}
		sort.Strings(waiting)
		if len(waiting) == 0 {
			return listings, nil
		}
		if time.Now().After(deadline) {
			var hosts []string
			for _, u := range waiting {
				hosts = append(hosts, units[u]...)
			}
			holders, err := s.holders(ctx, hosts)
			if err != nil {
				return nil, err
			}
			for _, u := range waiting {
				var held []string
				for _, h := range units[u] {
					if holders[h] != "" && !slices.Contains(held, holders[h]) {
						held = append(held, holders[h])
					}
				}
				why := "no scheduler holds its lease"
				if len(units[u]) > 1 || g.clusters[u] != nil {
					why = "no scheduler holds a lease of its members"
				}
				if len(held) > 0 {
					why = "its lease holder " + strings.Join(held, ", ") + " did not answer"
				}
				listings[u] = hostListing{Error: fmt.Sprintf("not listed within %s: %s", s.opts.ListWait, why)}
			}
			return listings, nil
		}
		if time.Now().After(again) {
			if g, err = s.readGraph(ctx); err != nil { // a host added or removed meanwhile
				return nil, err
			}
			s.announce(ctx, reportID)
			again = time.Now().Add(announceEvery)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(listPoll):
		}
	}
}

// How often awaitListings looks for listings, and asks again for the missing ones; how long
// a scheduler remembers the hosts it listed for a report.
const (
	listPoll      = 50 * time.Millisecond
	announceEvery = 2 * time.Second
	listingMemory = time.Hour
)

func (s *Service) readListings(ctx context.Context, reportID string) (map[string]hostListing, error) {
	rows, err := s.db().DriftListings(ctx, reportID)
	if err != nil {
		return nil, fmt.Errorf("drift: read listings: %w", err)
	}
	out := map[string]hostListing{}
	for _, r := range rows {
		var l hostListing
		if err := json.Unmarshal(r.Listing, &l); err != nil {
			return nil, fmt.Errorf("drift: read listings: %w", fmt.Errorf("listing of %s: %w", r.Host, err))
		}
		l.Scheduler = r.Scheduler
		out[r.Host] = l
	}
	return out, nil
}

// holders names the live holder of each host's lease, if any.
func (s *Service) holders(ctx context.Context, slugs []string) (map[string]string, error) {
	units := make([]string, len(slugs))
	for i, h := range slugs {
		units[i] = leases.HostUnit(h)
	}
	out, err := s.db().HostLeaseHolders(ctx, units)
	if err != nil {
		return nil, fmt.Errorf("drift: read lease holders: %w", err)
	}
	return out, nil
}

// listHeld lists, for the running report reportID, every live standalone Proxmox host whose
// lease this scheduler holds and every cluster it holds a member of, that nobody listed yet,
// and stores each listing fenced by the lease.
func (s *Service) listHeld(ctx context.Context, reportID string) {
	running, trigger, err := s.db().DriftReportRunning(ctx, reportID)
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) && ctx.Err() == nil {
			s.log.Error().Err(err).Str("report", reportID).Msg("read a drift report")
		}
		return
	}
	if !running {
		return
	}
	g, err := s.readGraph(ctx)
	if err == nil {
		var done map[string]hostListing
		if done, err = s.readListings(ctx, reportID); err == nil {
			s.listHosts(ctx, reportID, g, done, trigger == TriggerPlacement)
		}
	}
	if err != nil && ctx.Err() == nil {
		s.log.Error().Err(err).Str("report", reportID).Msg("drift listing")
	}
}

// lease is this scheduler's generation of host's lease, and whether it holds it (always,
// at no generation, without leases).
func (s *Service) lease(host string) (*int64, bool) {
	if s.opts.Lease == nil {
		return nil, true
	}
	n, ok := s.opts.Lease(leases.HostUnit(host))
	return &n, ok
}

// begin marks report/unit as being listed here; false when it is (or was) already.
func (s *Service) begin(reportID, unit string) (string, bool) {
	key := reportID + "/" + unit
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, busy := s.listing[key]; busy {
		return key, false
	}
	s.listing[key] = time.Now()
	return key, true
}

// forget lets the next announcement list key again (its listing was not stored).
func (s *Service) forget(key string) {
	s.mu.Lock()
	delete(s.listing, key)
	s.mu.Unlock()
}

func (s *Service) listHosts(ctx context.Context, reportID string, g *graphView, done map[string]hostListing, placementOnly bool) {
	s.mu.Lock()
	for k, at := range s.listing {
		if time.Since(at) > listingMemory {
			delete(s.listing, k)
		}
	}
	s.mu.Unlock()
	// Hosts are listed a few at a time, so one hanging host costs HostTimeout once, not
	// once per host after it.
	sem := make(chan struct{}, hostParallelism)
	var wg sync.WaitGroup
	for _, c := range slices.Sorted(maps.Keys(g.clusters)) {
		if _, ok := done[c]; ok {
			continue
		}
		var held []string
		for _, m := range g.clusters[c] {
			if _, ok := s.lease(m); ok {
				held = append(held, m)
			}
		}
		if len(held) == 0 {
			continue // no member is ours: another scheduler lists the cluster
		}
		key, ok := s.begin(reportID, c)
		if !ok {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		safego.Go(s.log, "drift-list-cluster", func() {
			defer wg.Done()
			defer func() { <-sem }()
			if !s.listCluster(ctx, reportID, g, c, held, placementOnly) {
				s.forget(key)
			}
		})
	}
	for _, h := range g.hosts {
		if _, ok := done[h.slug]; ok || g.clusterOf[h.slug] != "" || placementOnly {
			continue
		}
		gen, ok := s.lease(h.slug)
		if !ok {
			continue // another scheduler's: it lists this host through its own connection
		}
		key, ok := s.begin(reportID, h.slug)
		if !ok {
			continue // listing here now, or listed already
		}
		unit := leases.HostUnit(h.slug)
		wg.Add(1)
		sem <- struct{}{}
		safego.Go(s.log, "drift-list-host", func() {
			defer wg.Done()
			defer func() { <-sem }()
			l := s.listOne(ctx, g, h.slug)
			if err := s.storeListing(ctx, reportID, h.slug, unit, gen, l); err != nil {
				if ctx.Err() == nil {
					s.log.Error().Err(err).Str("host", h.slug).Msg("store a drift listing")
				}
				s.forget(key) // the next announcement tries again
			}
		})
	}
	wg.Wait()
}

// listOne lists one host and reads the configuration of the guests on it that the graph
// lacks, all within HostTimeout (the runner waits ListWait for it).
func (s *Service) listOne(ctx context.Context, g *graphView, slug string) hostListing {
	ctx, cancel := context.WithTimeout(ctx, s.opts.HostTimeout)
	defer cancel()
	l := hostListing{LXC: []LiveGuest{}, VMs: []LiveGuest{}}
	var err error
	if l.LXC, l.VMs, err = s.listHost(ctx, slug); err != nil {
		return hostListing{LXC: []LiveGuest{}, VMs: []LiveGuest{}, Error: err.Error()}
	}
	part := &Report{}
	g.diff(map[string]hostListing{slug: l}, part, false)
	var mine []Missing
	for _, m := range part.Missing {
		if m.Host == slug {
			mine = append(mine, m)
		}
	}
	s.readConfigs(ctx, mine)
	l.Configs = map[string]configResult{}
	for _, m := range mine {
		l.Configs[configKey(m.Kind, m.VMID)] = configResult{Config: m.Config, Error: m.ConfigError}
	}
	return l
}

// storeListing writes a host's listing once per report, only while this scheduler still
// holds the host's lease at the generation it listed under (gen nil: no leases).
func (s *Service) storeListing(ctx context.Context, reportID, slug, unit string, gen *int64, l hostListing) error {
	raw, err := json.Marshal(l)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	n, err := s.db().StoreDriftListing(wctx, reportID, slug, s.opts.SchedulerID, raw, gen, unit)
	if err == nil && n == 0 {
		s.log.Info().Str("host", slug).Str("report", reportID).Msg("drift listing not stored: listed already, or the lease moved")
	}
	return err
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
