package checkrun

// A guest that moved is never reported down (issue 30). Proxmox moves guests between the
// nodes of a cluster — `qm migrate`, `pct migrate`, or ha-manager recovering the HA guests
// of a node that died — and the graph learns of it only at the next drift discovery. Until
// then a check that goes through the node the graph names finds the guest gone (the node
// answers it has no such configuration) or cannot reach it (the node is down). Before that
// counts as the guest's health, the check asks the cluster where the guest is — one `pvesh
// get /cluster/resources` through the hop of a live member, shared by every check of that
// cluster for a short while — and, when it runs on another live node, runs through that
// node's hop and records what it finds there, noting the move. It then asks for a drift
// discovery, so the graph follows (the api applies the report's moves). A guest the cluster
// still places on the node that is down (HA has not recovered it yet) stays unknown behind
// that node, as before.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/oikos-hq/oikos/scheduler/internal/probeparse"
	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/remote"
)

// DefaultClusterTTL bounds how long a cluster's answer is reused (Options.ClusterTTL); a
// check reuses it for at most its own interval too, so every check of a cluster asks it at
// most once per interval between them.
const DefaultClusterTTL = 30 * time.Second

// clusterFinder says which clusters a Proxmox host belongs to; *fleet.Graph implements it.
// A Resolver without it (a test's fake) follows no guest.
type clusterFinder interface {
	ClustersOf(ctx context.Context, hostSlug string) ([]storage.ClusterPeers, error)
}

// errMovedNotHeld: the guest runs on a node whose lease another scheduler holds; that
// scheduler's connection is the only one to it, so this one does not observe it there.
var errMovedNotHeld = errors.New("moved to a node another scheduler holds")

// errPlacementRace: the cluster places the guest on a node that does not have it either
// (it is moving right now).
var errPlacementRace = errors.New("the node the cluster places the guest on does not have it")

// move is a guest found on another node than the graph's.
type move struct {
	guest            string // the guest's slug
	from, to         string // proxmox-host slugs: the graph's node, the node it runs on
	fromNode, toNode string // their Proxmox node names
	cluster          string // the cluster's slug
}

// note is the move as a result's summary records it (incidents read moved.guest, .from and
// .to: scheduler/internal/storage qMovedGuests).
func (m *move) note() map[string]any {
	return map[string]any{"guest": m.guest, "from": m.from, "to": m.to, "from_node": m.fromNode, "to_node": m.toNode,
		"cluster": m.cluster}
}

// clusterView is one answer of a cluster to probeparse.ClusterResourcesCommand.
type clusterView struct {
	at  time.Time
	res probeparse.ClusterResources
	err error
	// requested: a drift discovery was asked for a move this answer showed, so the moves it
	// shows are listed by a discovery that starts after it.
	requested bool
}

type cachedPeers struct {
	clusters []storage.ClusterPeers
	at       time.Time
}

// placements is what the runner learned from the clusters. Its maps are guarded by mu.
type placements struct {
	mu sync.Mutex
	// moved: guests running elsewhere than the graph says, by guest slug and the node the
	// asking check's graph names (moveKey), until the graph follows (or the cluster places
	// them back).
	moved map[string]move
	// views: the latest answer of each cluster, by cluster slug; asking: closed when the
	// question under way to that cluster ends.
	views  map[string]*clusterView
	asking map[string]chan struct{}
	// peers: the clusters of each host, read from the graph (ResolveTTL).
	peers map[string]cachedPeers
}

func (p *placements) init() {
	p.moved, p.views, p.asking, p.peers = map[string]move{}, map[string]*clusterView{}, map[string]chan struct{}{}, map[string]cachedPeers{}
}

// forgetPeers drops what was read of the graph's clusters (a reload: edges may have changed).
func (p *placements) forgetPeers() {
	p.mu.Lock()
	clear(p.peers)
	p.mu.Unlock()
}

// missingConfig recognises pct's and qm's answer about a vmid the node does not have
// (docs/proxmox.md): "Configuration file 'nodes/<node>/lxc/<vmid>.conf' does not exist".
func missingConfig(msg string) bool {
	return strings.Contains(msg, "Configuration file 'nodes/") && strings.Contains(msg, "does not exist")
}

// guestGone says whether what a node answered about a guest means the guest is not there to
// be observed: the node has no such guest, or the node cannot be reached.
func guestGone(res remote.Result, err error) (gone, unreachable bool) {
	switch {
	case err == nil:
		return res.ExitCode != 0 && missingConfig(string(res.Stderr)), false
	case errors.Is(err, remote.ErrUnreachable):
		return true, true
	case errors.Is(err, remote.ErrGuestExec):
		return missingConfig(err.Error()), false
	}
	return false, false
}

// hop is where a guest's probe ran and what it answered.
type hop struct {
	res  remote.Result
	err  error
	host string // the proxmox-host slug the answer came from
	// mv: the guest runs elsewhere than the graph says (host is its node).
	mv *move
	// listed: the cluster's placement, when it was asked and still places the guest on the
	// node that could not be reached.
	listed  *probeparse.ClusterGuest
	cluster string
}

// guestRef names the guest a probe is about.
type guestRef struct {
	slug      string // the guest's slug
	graphHost string // its proxmox-host by the graph
	vmid      int
	kind      string // remote.KindLXC or remote.KindVM
}

// key is the guest's key in placements.moved: the checks of a guest whose graph names
// different nodes (a proxmox-guest check carries its node in its config, derived when the
// graph last changed) each keep their own.
func (g guestRef) key() string { return g.slug + "@" + g.graphHost }

// onNode runs a probe about guest g on the node it is on: the graph's, or the one the
// cluster last placed it on; and when that node says the guest is gone (or cannot be
// reached), asks the cluster and runs it again on the node the cluster names. run runs the
// probe through the proxmox-host host.
func (r *Runner) onNode(ctx context.Context, d *checkDef, g guestRef, run func(host string) (remote.Result, error)) hop {
	host := g.graphHost
	var mv *move
	if m, ok := r.movedFrom(g); ok {
		host, mv = m.to, &m
	}
	began := time.Now()
	res, err := run(host)
	gone, unreachable := guestGone(res, err)
	if !gone {
		return hop{res: res, err: err, host: host, mv: mv}
	}
	w, ok := r.locate(ctx, host, g, min(r.opts.ClusterTTL, d.Interval), began, unreachable)
	if !ok {
		return hop{res: res, err: err, host: host, mv: mv}
	}
	if w.member == host {
		// The cluster agrees it is on the node that could not answer for it: as before,
		// unknown behind that node (or missing from it).
		return hop{res: res, err: err, host: host, mv: mv, listed: &w.guest, cluster: w.cluster}
	}
	next := r.remember(ctx, g, w)
	if next == nil {
		// Back on the graph's node.
		res, err = run(g.graphHost)
		return hop{res: res, err: err, host: g.graphHost}
	}
	if r.opts.Lease != nil {
		if _, held := r.opts.Lease("host:" + next.to); !held {
			return hop{err: fmt.Errorf("%s: %w", next.to, errMovedNotHeld), host: next.to, mv: next}
		}
	}
	res, err = run(next.to)
	if again, _ := guestGone(res, err); again && err == nil {
		return hop{err: fmt.Errorf("%s: %w", next.to, errPlacementRace), host: next.to, mv: next}
	}
	return hop{res: res, err: err, host: next.to, mv: next}
}

// movedFrom returns where guest g runs when the cluster placed it elsewhere than the graph
// does, and forgets that once the graph followed.
func (r *Runner) movedFrom(g guestRef) (move, bool) {
	r.places.mu.Lock()
	defer r.places.mu.Unlock()
	m, ok := r.places.moved[g.key()]
	if ok && m.to == g.graphHost {
		delete(r.places.moved, g.key()) // the graph followed
		return move{}, false
	}
	return m, ok
}

// remember records where the cluster placed g (nil: on the graph's node) and, the first
// time an answer shows a move, asks for a drift discovery so the graph follows.
func (r *Runner) remember(ctx context.Context, g guestRef, w where) *move {
	r.places.mu.Lock()
	if w.member == g.graphHost {
		delete(r.places.moved, g.key())
		r.places.mu.Unlock()
		return nil
	}
	m := move{guest: g.slug, from: g.graphHost, to: w.member, fromNode: w.names[g.graphHost], toNode: w.guest.Node, cluster: w.cluster}
	if m.fromNode == "" {
		m.fromNode = nodeName(g.graphHost)
	}
	prev, had := r.places.moved[g.key()]
	r.places.moved[g.key()] = m
	ask := !w.view.requested && (!had || prev.to != m.to)
	if ask {
		w.view.requested = true
	}
	r.places.mu.Unlock()
	if !had || prev.to != m.to {
		r.m.moves.Inc()
		r.log.Info().Str("guest", g.slug).Str("from", m.from).Str("to", m.to).Str("cluster", m.cluster).
			Msg("guest runs on another node than the graph says; checking it there and asking the graph to follow")
	}
	if ask {
		r.requestDrift(ctx)
	}
	return &m
}

// where is the cluster's placement of a guest.
type where struct {
	cluster string
	guest   probeparse.ClusterGuest
	member  string            // the proxmox-host slug of the node it is on
	names   map[string]string // the members' node names, by slug
	view    *clusterView
}

// locate asks the cluster of host (through a live member, sharing an answer younger than
// maxAge) where guest g is. An answer that contradicts what host just said — the guest
// missing there, the answer placing it there — and predates began is asked again once. ok
// is false when host is in no cluster, no member answered, or the cluster does not list the
// guest (it is gone for good: the result stays what host said).
func (r *Runner) locate(ctx context.Context, host string, g guestRef, maxAge time.Duration, began time.Time, unreachable bool) (where, bool) {
	finder, ok := r.fleet.(clusterFinder)
	if !ok {
		return where{}, false
	}
	clusters, err := r.clustersOf(ctx, finder, host)
	if err != nil {
		r.log.Warn().Err(err).Str("host", host).Msg("reading the cluster of a Proxmox host failed; the guest's check stands as it is")
		return where{}, false
	}
	skip := ""
	if unreachable {
		skip = host // ask the others
	}
	for _, c := range clusters {
		nodes, names := map[string]string{}, map[string]string{}
		for _, m := range c.Members {
			n, _ := m.Attributes["node"].(string)
			if n == "" {
				n = nodeName(m.Slug)
			}
			nodes[n], names[m.Slug] = m.Slug, n
		}
		v := r.clusterAnswer(ctx, c, skip, maxAge, time.Time{})
		w, found := placed(v, c.Cluster, nodes, g)
		if found && w.member == host && !unreachable && v.at.Before(began) {
			v = r.clusterAnswer(ctx, c, skip, maxAge, began)
			w, found = placed(v, c.Cluster, nodes, g)
		}
		if found {
			w.names = names
			return w, true
		}
	}
	return where{}, false
}

// placed finds guest g in a cluster's answer; the node must be a member the graph knows.
func placed(v *clusterView, cluster string, nodes map[string]string, g guestRef) (where, bool) {
	if v == nil || v.err != nil {
		return where{}, false
	}
	cg, ok := v.res.Guests[g.vmid]
	if !ok || (cg.Kind == "qemu") != (g.kind == remote.KindVM) {
		return where{}, false
	}
	member, ok := nodes[cg.Node]
	if !ok {
		return where{}, false
	}
	return where{cluster: cluster, guest: cg, member: member, view: v}, true
}

// clustersOf reads host's clusters from the graph, reusing a recent read.
func (r *Runner) clustersOf(ctx context.Context, finder clusterFinder, host string) ([]storage.ClusterPeers, error) {
	r.places.mu.Lock()
	c, ok := r.places.peers[host]
	r.places.mu.Unlock()
	if ok && time.Since(c.at) < r.opts.ResolveTTL {
		return c.clusters, nil
	}
	clusters, err := finder.ClustersOf(ctx, host)
	if err != nil {
		return nil, err
	}
	r.places.mu.Lock()
	r.places.peers[host] = cachedPeers{clusters: clusters, at: time.Now()}
	r.places.mu.Unlock()
	return clusters, nil
}

// clusterAnswer returns the cluster's answer: the latest one when younger than maxAge (and
// not older than notBefore), else a new one — one question at a time per cluster, so the
// checks that want it together share it. A question that failed is an answer too, reused
// as long: a cluster that cannot be asked is not asked once per guest.
func (r *Runner) clusterAnswer(ctx context.Context, c storage.ClusterPeers, skip string, maxAge time.Duration, notBefore time.Time) *clusterView {
	for {
		r.places.mu.Lock()
		v := r.places.views[c.Cluster]
		if v != nil && time.Since(v.at) < maxAge && !v.at.Before(notBefore) {
			r.places.mu.Unlock()
			return v
		}
		if wait, ok := r.places.asking[c.Cluster]; ok {
			r.places.mu.Unlock()
			select {
			case <-wait:
				notBefore = time.Time{} // whatever that question found is as fresh as this one would be
				continue
			case <-ctx.Done():
				return &clusterView{at: time.Now(), err: ctx.Err()}
			}
		}
		done := make(chan struct{})
		r.places.asking[c.Cluster] = done
		r.places.mu.Unlock()

		nv := r.askCluster(ctx, c, skip)
		r.places.mu.Lock()
		delete(r.places.asking, c.Cluster)
		if ctx.Err() == nil {
			r.places.views[c.Cluster] = nv
		}
		close(done)
		r.places.mu.Unlock()
		return nv
	}
}

// askCluster runs probeparse.ClusterResourcesCommand through the hop of the first member
// (other than skip, the node that just failed to answer for its guest) that answers.
func (r *Runner) askCluster(ctx context.Context, c storage.ClusterPeers, skip string) *clusterView {
	var errs []error
	for _, m := range r.askOrder(c.Members) {
		if m.Slug == skip {
			continue
		}
		t, err := r.resolve(ctx, m.Slug)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Slug, err))
			continue
		}
		r.m.clusterQueries.Inc()
		at := time.Now()
		res, err := r.ssh.Probe(ctx, t, probeparse.ClusterResourcesCommand)
		if err != nil {
			r.forgetOnFailure(m.Slug, err)
			errs = append(errs, fmt.Errorf("%s: %w", m.Slug, err))
			continue
		}
		if res.ExitCode != 0 {
			errs = append(errs, fmt.Errorf("%s: pvesh exited %d: %s", m.Slug, res.ExitCode, probeparse.Clip(string(res.Stderr), 200)))
			continue
		}
		cr, err := probeparse.ParseClusterResources(res.Stdout)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Slug, err))
			continue
		}
		return &clusterView{at: at, res: cr}
	}
	err := errors.Join(errs...)
	if err == nil {
		err = errors.New("no other member to ask")
	}
	r.log.Warn().Err(err).Str("cluster", c.Cluster).Msg("no member of the cluster said where its guests are")
	return &clusterView{at: time.Now(), err: err}
}

// askOrder puts first the members whose lease this scheduler holds: their connection is
// this scheduler's anyway. The others come after — a read-only question on a second
// connection is better than a guest reported down because it moved.
func (r *Runner) askOrder(members []remote.Entity) []remote.Entity {
	if r.opts.Lease == nil {
		return members
	}
	held := make([]remote.Entity, 0, len(members))
	var others []remote.Entity
	for _, m := range members {
		if _, ok := r.opts.Lease("host:" + m.Slug); ok {
			held = append(held, m)
		} else {
			others = append(others, m)
		}
	}
	return append(held, others...)
}

// requestDrift asks the schedulers for a drift discovery (NOTIFY oikos_drift with a request
// id, as the api does); its report lists the move, and the api moves the hosts edge.
func (r *Runner) requestDrift(ctx context.Context) {
	id, err := uuid.NewV7()
	if err != nil {
		r.log.Warn().Err(err).Msg("asking for a drift discovery: no request id")
		return
	}
	payload, err := json.Marshal(struct {
		RequestID string `json:"request_id"`
	}{id.String()})
	if err == nil {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err = storage.New(r.opts.Pool).Notify(qctx, eventbus.ChannelDrift, string(payload))
		cancel()
	}
	if err != nil {
		r.log.Warn().Err(err).Msg("asking for a drift discovery after a guest moved failed; the graph follows at the next one")
		return
	}
	r.m.driftRequests.Inc()
}

// noteMove adds what h learned about the guest's placement to out.
func noteMove(out *results.Result, h hop) {
	switch {
	case h.mv != nil:
		if out.Summary == nil {
			out.Summary = map[string]any{}
		}
		out.Summary["moved"] = h.mv.note()
		out.Placement = h.mv.to
		out.Reason += fmt.Sprintf(" (moved: %s → %s)", h.mv.fromNode, h.mv.toNode)
	case h.listed != nil:
		if out.Summary == nil {
			out.Summary = map[string]any{}
		}
		out.Summary["placement"] = map[string]any{"cluster": h.cluster, "node": h.listed.Node, "status": h.listed.Status,
			"hastate": h.listed.HAState}
		if h.listed.HAState != "" {
			out.Reason += fmt.Sprintf("; cluster %s still places it on %s (HA state %s)", nodeName(h.cluster), h.listed.Node, h.listed.HAState)
		}
	}
}

// movedFailure is the result of a run that could not follow its guest (errMovedNotHeld,
// errPlacementRace): unknown, never down.
func movedFailure(h hop) (results.Result, bool) {
	var out results.Result
	switch {
	case errors.Is(h.err, errMovedNotHeld):
		out = results.Unknown(results.ClassUnreachable, "%s runs on %s now, whose connection another scheduler holds; it is observed there once the graph follows",
			h.mv.guest, h.mv.to)
	case errors.Is(h.err, errPlacementRace):
		out = results.Unknown(results.ClassUnreachable, "the cluster places %s on %s, which does not have it (moving now?)", h.mv.guest, h.mv.to)
	default:
		return results.Result{}, false
	}
	noteMove(&out, h)
	return out, true
}

// nodeName is the name part of a slug ("proxmox-host:atlas" → "atlas").
func nodeName(slug string) string {
	if _, name, ok := strings.Cut(slug, ":"); ok {
		return name
	}
	return slug
}
