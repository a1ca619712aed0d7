package drift

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/leases"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/safego"
)

// ClusterResourcesCommand lists a whole cluster: every node with its status and every guest
// with the node it runs on (pve-manager PVE/API2/Cluster.pm, GET /cluster/resources). It is
// answered by any member that is up, for all of them, from the cluster's shared state.
const ClusterResourcesCommand = "pvesh get /cluster/resources --output-format json"

// Moved is a guest the cluster runs on another node than the graph's host.
type Moved struct {
	Slug string `json:"slug"`
	VMID int    `json:"vmid"`
	Kind string `json:"kind"`
	// From is the graph's host (slug); To the host of the node the cluster reports, "" when
	// that node is not in the graph (the api then leaves the graph as it is).
	From string `json:"from"`
	To   string `json:"to"`
	// Node is the Proxmox node the cluster reports the guest on.
	Node string `json:"node"`
}

// ClusterReport is one cluster as its listing described it.
type ClusterReport struct {
	Name  string        `json:"name"` // the cluster entity's slug
	Nodes []ClusterNode `json:"nodes"`
	// Via is the member the cluster was listed through; Error why it could not be listed.
	Via   string `json:"via,omitempty"`
	Error string `json:"error,omitempty"`
}

// ClusterNode is one node of a cluster.
type ClusterNode struct {
	Node string `json:"node"`
	// Address is the node's address when the graph knows it.
	Address string `json:"address,omitempty"`
	Online  bool   `json:"online"`
	// Host is the node's proxmox-host entity, "" when the node is not in the graph.
	Host string `json:"host"`
}

// PlacedGuest is a guest and the node a cluster reports it on.
type PlacedGuest struct {
	LiveGuest
	Node    string `json:"node"`
	HAState string `json:"hastate,omitempty"`
}

// NodeStatus is a node of /cluster/resources.
type NodeStatus struct {
	Node   string `json:"node"`
	Online bool   `json:"online"`
}

// clusterListing is what a cluster's listing holds (hostListing.Cluster).
type clusterListing struct {
	Via    string        `json:"via"`
	Nodes  []NodeStatus  `json:"nodes"`
	Guests []PlacedGuest `json:"guests"`
	// Tried are the members that did not answer before Via did.
	Tried []string `json:"tried,omitempty"`
}

// ParseClusterResources reads `pvesh get /cluster/resources --output-format json`: a JSON
// array of resources, each with `id` and `type` (node, qemu, lxc, storage, pool, sdn); a
// guest has `vmid` (a number, or a string on older releases), `node`, `name`, `status` and
// optionally `lock`, `hastate`; a node has `node` and `status` (online, offline, unknown).
// Other types are skipped.
func ParseClusterResources(out string) ([]NodeStatus, []PlacedGuest, error) {
	var items []map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &items); err != nil {
		return nil, nil, fmt.Errorf("/cluster/resources: %w", err)
	}
	var nodes []NodeStatus
	var guests []PlacedGuest
	for _, it := range items {
		str := func(k string) string { v, _ := it[k].(string); return v }
		switch str("type") {
		case "node":
			nodes = append(nodes, NodeStatus{Node: str("node"), Online: str("status") == "online"})
		case "lxc", "qemu":
			vmid, ok := jsonInt(it["vmid"])
			if !ok {
				// An id "lxc/101" carries the vmid too.
				_, tail, _ := strings.Cut(str("id"), "/")
				if vmid, ok = jsonInt(tail); !ok {
					return nil, nil, fmt.Errorf("/cluster/resources: guest %q without a vmid", str("id"))
				}
			}
			kind := "lxc"
			if str("type") == "qemu" {
				kind = "vm"
			}
			if str("node") == "" {
				return nil, nil, fmt.Errorf("/cluster/resources: guest %s/%d without a node", kind, vmid)
			}
			guests = append(guests, PlacedGuest{LiveGuest: LiveGuest{Kind: kind, VMID: vmid, Name: str("name"), Status: str("status"),
				Lock: str("lock")}, Node: str("node"), HAState: str("hastate")})
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	sort.Slice(guests, func(i, j int) bool { return guests[i].VMID < guests[j].VMID })
	return nodes, guests, nil
}

// jsonInt reads a whole number a JSON decoder gave as float64 or as a string.
func jsonInt(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		return int(x), x == float64(int(x)) && x > 0
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		return n, err == nil && n > 0
	}
	return 0, false
}

// clusterTakeover is how long a scheduler holding only later members of a cluster waits for
// the holder of an earlier member to list it before listing it itself.
func (s *Service) clusterTakeover() time.Duration { return s.opts.HostTimeout / 2 }

// listCluster lists cluster c through the members held here (in order), and stores the
// listing fenced by the lease of the member that answered. It reports whether a listing is
// stored (or need not be, because another scheduler stored one).
func (s *Service) listCluster(ctx context.Context, reportID string, g *graphView, c string, held []string, placementOnly bool) bool {
	members := g.clusters[c]
	if held[0] != members[0] {
		// The first member's holder lists it; take over only when it has not in time.
		deadline := time.Now().Add(s.clusterTakeover())
		for time.Now().Before(deadline) {
			done, err := s.readListings(ctx, reportID)
			if err == nil {
				if _, ok := done[c]; ok {
					return true
				}
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(listPoll):
			}
		}
	}
	lctx, cancel := context.WithTimeout(ctx, s.opts.HostTimeout)
	defer cancel()
	cl := &clusterListing{}
	var errs []string
	var via string
	for _, m := range held {
		out, err := s.runOn(lctx, m, ClusterResourcesCommand)
		if err == nil {
			cl.Nodes, cl.Guests, err = ParseClusterResources(out)
		}
		if err != nil {
			errs = append(errs, err.Error())
			cl.Tried = append(cl.Tried, m)
			if lctx.Err() != nil {
				break
			}
			continue
		}
		via = m
		break
	}
	l := hostListing{Cluster: cl}
	storeAs := via
	if via == "" {
		if len(held) < len(members) {
			// Another scheduler's members may answer: leave the cluster to it (the runner
			// names the holders if nobody lists it).
			s.log.Warn().Str("cluster", c).Strs("errors", errs).Msg("no member held here answered the cluster listing")
			return false
		}
		l.Error = "no member answered: " + strings.Join(errs, "; ")
		storeAs = held[0]
	} else {
		cl.Via = via
		if !placementOnly {
			l.Configs = s.readClusterConfigs(lctx, g, c, via, cl.Guests)
		}
	}
	gen, _ := s.lease(storeAs)
	if err := s.storeListing(ctx, reportID, c, leases.HostUnit(storeAs), gen, l); err != nil {
		if ctx.Err() == nil {
			s.log.Error().Err(err).Str("cluster", c).Msg("store a cluster's drift listing")
		}
		return false
	}
	return true
}

// readClusterConfigs reads, through member via, the configuration of each guest of the
// cluster that the graph lacks (pvesh get /nodes/N/{lxc,qemu}/V/config: the cluster proxies
// it to the guest's node), keyed by node and configKey.
func (s *Service) readClusterConfigs(ctx context.Context, g *graphView, c, via string, guests []PlacedGuest) map[string]configResult {
	part := &Report{}
	g.diff(map[string]hostListing{c: {Cluster: &clusterListing{Via: via, Guests: guests}}}, part, true)
	missing := make([]Missing, 0, len(part.Missing))
	for _, m := range part.Missing {
		if m.Cluster == c {
			missing = append(missing, m)
		}
	}
	out := map[string]configResult{}
	type res struct {
		key string
		r   configResult
	}
	results := make(chan res, len(missing))
	sem := make(chan struct{}, configParallelism)
	for _, m := range missing {
		sem <- struct{}{}
		safego.Go(s.log, "drift-cluster-config", func() {
			defer func() { <-sem }()
			defer func() {
				if r := recover(); r != nil { // every guest gets an answer, or the loop below waits forever
					results <- res{m.Node + "/" + configKey(m.Kind, m.VMID), configResult{Error: fmt.Sprint("internal error: ", r)}}
				}
			}()
			typ := "lxc"
			if m.Kind == "vm" {
				typ = "qemu"
			}
			k := m.Node + "/" + configKey(m.Kind, m.VMID)
			o, err := s.runOn(ctx, via, fmt.Sprintf("pvesh get /nodes/%s/%s/%d/config --output-format json", m.Node, typ, m.VMID))
			if err != nil {
				results <- res{k, configResult{Error: err.Error()}}
				return
			}
			cfg, err := parseConfigJSON(m.Kind, o)
			if err != nil {
				results <- res{k, configResult{Error: err.Error()}}
				return
			}
			results <- res{k, configResult{Config: &cfg}}
		})
	}
	for range missing {
		r := <-results
		out[r.key] = r.r
	}
	return out
}

// parseConfigJSON reads a guest's configuration as pvesh answers it in JSON (the keys of
// pct config / qm config, values as numbers or strings).
func parseConfigJSON(kind, out string) (GuestConfig, error) {
	var kv map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &kv); err != nil {
		return GuestConfig{}, fmt.Errorf("guest config: %w", err)
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		v := kv[k]
		if f, ok := v.(float64); ok && f == float64(int64(f)) {
			v = int64(f)
		}
		fmt.Fprintf(&b, "%s: %v\n", k, v)
	}
	return ParseGuestConfig(kind, b.String()), nil
}

// clusterDiffer compares the graph's guests on cluster members with the clusters' listings.
type clusterDiffer struct {
	g *graphView
	// by cluster: the guests by kind/vmid, the nodes' status, node name → host slug
	placed     map[string]map[string]PlacedGuest
	online     map[string]map[string]bool
	hostOfNode map[string]map[string]string
	listed     map[string]bool
	matched    map[string]bool // cluster + "/" + kind/vmid
	liveGuests int
}

// nodeName is the Proxmox node name of a host entity: its node attribute, else its name.
func nodeName(e graphGuest) string {
	if n, _ := e.attrs["node"].(string); strings.TrimSpace(n) != "" {
		return strings.TrimSpace(n)
	}
	return e.name
}

// address is a host entity's address as the resolver would dial it.
func address(e graphGuest) string {
	for _, k := range []string{"public_ipv4", "mesh_ipv4", "lan_ipv4"} {
		if v, _ := e.attrs[k].(string); strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// clusterDiff reports every cluster and its members (rep.Clusters, rep.Hosts) and returns
// what compare and missing need.
func (g *graphView) clusterDiff(listings map[string]hostListing, rep *Report) *clusterDiffer {
	cd := &clusterDiffer{g: g, placed: map[string]map[string]PlacedGuest{}, online: map[string]map[string]bool{},
		hostOfNode: map[string]map[string]string{}, listed: map[string]bool{}, matched: map[string]bool{}}
	hosts := map[string]graphGuest{}
	for _, h := range g.hosts {
		hosts[h.slug] = h
	}
	for _, c := range slices.Sorted(maps.Keys(g.clusters)) {
		l, ok := listings[c]
		cr := ClusterReport{Name: c, Nodes: []ClusterNode{}}
		cd.hostOfNode[c] = map[string]string{}
		addr := map[string]string{}
		for _, m := range g.clusters[c] {
			cd.hostOfNode[c][nodeName(hosts[m])] = m
			addr[nodeName(hosts[m])] = address(hosts[m])
		}
		why := ""
		switch {
		case !ok:
			why = "not listed"
		case l.Error != "":
			why = l.Error
		case l.Cluster == nil:
			why = "listing without the cluster's resources"
		}
		counts := map[string][2]int{}
		if why == "" {
			cd.listed[c] = true
			cr.Via = l.Cluster.Via
			cd.online[c] = map[string]bool{}
			for _, n := range l.Cluster.Nodes {
				cd.online[c][n.Node] = n.Online
				cr.Nodes = append(cr.Nodes, ClusterNode{Node: n.Node, Address: addr[n.Node], Online: n.Online, Host: cd.hostOfNode[c][n.Node]})
			}
			cd.placed[c] = map[string]PlacedGuest{}
			for _, pg := range l.Cluster.Guests {
				cd.placed[c][configKey(pg.Kind, pg.VMID)] = pg
				n := counts[pg.Node]
				if pg.Kind == "vm" {
					n[1]++
				} else {
					n[0]++
				}
				counts[pg.Node] = n
			}
			cd.liveGuests += len(l.Cluster.Guests)
		} else {
			cr.Error = why
			for _, m := range g.clusters[c] {
				cr.Nodes = append(cr.Nodes, ClusterNode{Node: nodeName(hosts[m]), Address: address(hosts[m]), Host: m})
			}
		}
		rep.Clusters = append(rep.Clusters, cr)
		for _, m := range g.clusters[c] {
			hr := HostReport{Host: m, Cluster: c, Scheduler: l.Scheduler}
			node := nodeName(hosts[m])
			online, known := cd.online[c][node]
			switch {
			case why != "":
				hr.Error = "cluster " + c + ": " + why
			case !known:
				hr.Error = fmt.Sprintf("node %q is not a node of cluster %s (per /cluster/resources)", node, c)
			case !online:
				hr.Error = "offline in cluster " + c
			default:
				hr.Reachable = true
			}
			if !hr.Reachable {
				rep.Summary.HostsUnreachable++
			}
			hr.LXC, hr.VM = counts[node][0], counts[node][1]
			rep.Hosts = append(rep.Hosts, hr)
		}
	}
	return cd
}

// compare places one guest entity whose graph host is a member of a cluster: where the
// cluster runs it (matched, moved) or that it does not (ghost), or that it cannot tell
// (unchecked: the cluster was not listed, or the guest's node is down and no longer lists it).
func (cd *clusterDiffer) compare(e graphGuest, host string, vmid int, rep *Report) {
	c := cd.g.clusterOf[host]
	if !cd.listed[c] {
		rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: e.slug, Reason: "its cluster " + c + " could not be listed"})
		return
	}
	var node string
	for n, h := range cd.hostOfNode[c] {
		if h == host {
			node = n
		}
	}
	k := configKey(e.kind, vmid)
	pg, ok := cd.placed[c][k]
	switch {
	case ok && pg.Node == node:
		cd.matched[c+"/"+k] = true
		if !cd.online[c][node] {
			// The cluster still places it on its node, which is down: the last known
			// placement holds, but nothing is confirmed.
			rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: e.slug,
				Reason: "its host " + host + " is offline in cluster " + c + " (last known placement)"})
		}
	case ok:
		cd.matched[c+"/"+k] = true
		rep.Moved = append(rep.Moved, Moved{Slug: e.slug, VMID: vmid, Kind: e.kind, From: host, To: cd.hostOfNode[c][pg.Node], Node: pg.Node})
	case !cd.online[c][node]:
		rep.Unchecked = append(rep.Unchecked, Unchecked{Entity: e.slug, Reason: "its host " + host + " is offline in cluster " + c})
	case e.state == "planned":
	default:
		rep.Ghost = append(rep.Ghost, Ghost{Entity: e.slug, EntityID: e.id, State: e.state, Host: host, Kind: e.kind, VMID: vmid})
	}
}

// missing lists the guests of the clusters that no entity describes, with the
// configuration their listing read.
func (cd *clusterDiffer) missing(listings map[string]hostListing) []Missing {
	var out []Missing
	for c, placed := range cd.placed {
		for k, pg := range placed {
			if cd.matched[c+"/"+k] {
				continue
			}
			m := Missing{Host: cd.hostOfNode[c][pg.Node], LiveGuest: pg.LiveGuest, Node: pg.Node, Cluster: c}
			if r, ok := listings[c].Configs[pg.Node+"/"+k]; ok {
				m.Config, m.ConfigError = r.Config, r.Error
			}
			out = append(out, m)
		}
	}
	return out
}

// PlacementNow asks for a placement sweep at once (after a migration ran through Oikos).
func (s *Service) PlacementNow() {
	select {
	case s.placeNow <- struct{}{}:
	default:
	}
}

// placementKeep is how long placement sweeps' reports are kept: long enough for the api to
// follow their moves and for a reader to see them.
const placementKeep = time.Hour

// runPlacement runs a placement sweep when there is a cluster to list and (unless now) none
// ran within the last PlacementEvery, by any scheduler.
func (s *Service) runPlacement(ctx context.Context, now bool) (*Report, error) {
	g, err := s.readGraph(ctx)
	if err != nil {
		return nil, err
	}
	if len(g.clusters) == 0 {
		return nil, nil
	}
	var reportID string
	err = s.claim(ctx, func(tx *storage.Store) (bool, error) {
		if !now && s.opts.PlacementEvery > 0 {
			last, err := tx.LastPlacement(ctx)
			if err != nil {
				return false, err
			}
			// Another scheduler's sweep of this interval counts (a tenth of slack for the
			// tickers' drift).
			if last != nil && s.opts.Clock().Sub(*last) < s.opts.PlacementEvery*9/10 {
				return false, nil
			}
		}
		if err := tx.PrunePlacements(ctx, s.opts.Clock().Add(-placementKeep)); err != nil {
			return false, err
		}
		var err error
		reportID, err = s.insertRunning(ctx, tx, TriggerPlacement, nil)
		return err == nil, err
	})
	if err != nil || reportID == "" {
		return nil, err
	}
	return s.execute(ctx, reportID, TriggerPlacement, nil)
}

// RunPlacementNow runs a placement sweep at once and returns its report (tests, benchmarks);
// nil when no cluster is in the graph.
func (s *Service) RunPlacementNow(ctx context.Context) (*Report, error) {
	return s.runPlacement(ctx, true)
}

// IsMigration reports whether command moves a guest to another node (qm migrate, pct
// migrate), so that its success is followed by a placement sweep.
func IsMigration(command string) bool {
	f := strings.Fields(command)
	for i := 0; i+1 < len(f); i++ {
		if (f[i] == "qm" || f[i] == "pct" || strings.HasSuffix(f[i], "/qm") || strings.HasSuffix(f[i], "/pct")) && f[i+1] == "migrate" {
			return true
		}
	}
	return false
}
