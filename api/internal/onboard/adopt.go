package onboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/fleetstore"
	"github.com/oikos-hq/oikos/shared/attr"
)

// guestConfig is drift's GuestConfig as the report stores it.
type guestConfig struct {
	Hostname     string   `json:"hostname"`
	Cores        int      `json:"cores"`
	MemoryMB     int      `json:"memory_mb"`
	SwapMB       int      `json:"swap_mb"`
	DiskGB       int      `json:"disk_gb"`
	Storage      string   `json:"storage"`
	OSType       string   `json:"ostype"`
	OnBoot       bool     `json:"onboot"`
	Tags         []string `json:"tags"`
	Unprivileged bool     `json:"unprivileged"`
	GuestAgent   bool     `json:"qemu_guest_agent"`
}

// missingGuest is one entry of a drift report's missing list.
type missingGuest struct {
	Host string `json:"host"`
	// Node and Cluster place a guest of a cluster node the graph does not have yet (Host "").
	Node    string       `json:"node"`
	Cluster string       `json:"cluster"`
	Kind    string       `json:"kind"`
	VMID    int          `json:"vmid"`
	Name    string       `json:"name"`
	Status  string       `json:"status"`
	Config  *guestConfig `json:"config"`
	raw     json.RawMessage
}

type hostListing struct {
	Host      string `json:"host"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error"`
}

func missingOf(report map[string]any) ([]missingGuest, error) {
	raw, err := json.Marshal(report["missing"])
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("drift report: missing: %w", err)
	}
	out := make([]missingGuest, 0, len(items))
	for _, it := range items {
		var m missingGuest
		if err := json.Unmarshal(it, &m); err != nil {
			return nil, fmt.Errorf("drift report: missing: %w", err)
		}
		m.raw = it
		out = append(out, m)
	}
	return out, nil
}

func hostsOf(report map[string]any) []hostListing {
	raw, _ := json.Marshal(report["hosts"])
	var hs []hostListing
	_ = json.Unmarshal(raw, &hs)
	return hs
}

// adoptBody is POST /audit/drift/adopt: every missing guest (all), or the ones named by vmid,
// optionally only on one host.
type adoptBody struct {
	All   bool   `json:"all"`
	VMIDs []int  `json:"vmids"`
	Host  string `json:"host"`
}

// Adopted is one guest made an entity.
type Adopted struct {
	Entity string `json:"entity"`
	Host   string `json:"host"`
	Kind   string `json:"kind"`
	VMID   int    `json:"vmid"`
	// StoppedOnPurpose: the guest was stopped when adopted, so it was recorded as meant to
	// be stopped (expected_status: stopped) rather than failing its first check.
	StoppedOnPurpose bool `json:"stopped_on_purpose,omitempty"`
}

// Skipped is a guest not adopted, and why.
type Skipped struct {
	Host   string `json:"host"`
	Kind   string `json:"kind"`
	VMID   int    `json:"vmid"`
	Reason string `json:"reason"`
}

// AdoptAnswer is what POST /audit/drift/adopt answers.
type AdoptAnswer struct {
	ReportID string    `json:"report_id"`
	Adopted  []Adopted `json:"adopted"`
	Skipped  []Skipped `json:"skipped"`
	// Clusters (all, on no host): the clusters, their nodes and member-of edges.
	Clusters     []AdoptedCluster `json:"clusters,omitempty"`
	EdgesCreated int              `json:"edges_created,omitempty"`
	// Note says what is left to do, when something is.
	Note string `json:"note,omitempty"`
}

// adopt turns the latest drift report's missing guests into entities through the graph
// service: one transaction per host (its guests and their hosts edges, audited, checks
// derived). A guest the graph already has (same host, kind and vmid) is skipped, so adopting
// twice adopts nothing new.
func (a *API) adopt(c echo.Context) error {
	var b adoptBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	if b.All == (len(b.VMIDs) > 0) {
		return request.Unprocessable("vmids", "say which guests: \"all\": true, or \"vmids\": [101, 102] (not both)")
	}
	ctx := c.Request().Context()
	rep, err := a.reader.LatestDrift(ctx)
	if errors.Is(err, apierr.ErrNotFound) {
		return request.NotFound("no drift report yet: GET /api/v1/audit/drift?refresh=true (oikos drift --refresh) asks for one")
	}
	if err != nil {
		return err
	}
	missing, err := missingOf(rep.Report)
	if err != nil {
		return err
	}
	hostSlugs := map[string]bool{}
	for _, h := range hostsOf(rep.Report) {
		hostSlugs[h.Host] = true
	}
	if b.Host != "" && !strings.Contains(b.Host, ":") {
		b.Host = "proxmox-host:" + b.Host
	}
	if b.Host != "" && !hostSlugs[b.Host] {
		return request.Unprocessable("host", "%s was not listed by the latest drift report (%s)", b.Host, rep.ID)
	}
	want := map[int]bool{}
	for _, v := range b.VMIDs {
		if v <= 0 {
			return request.Unprocessable("vmids", "%d is not a vmid", v)
		}
		want[v] = true
	}
	out := AdoptAnswer{ReportID: rep.ID, Adopted: []Adopted{}, Skipped: []Skipped{}}
	m := meta(c)
	byNode, err := a.hostsByNode(ctx)
	if err != nil {
		return err
	}
	nodeHosts := map[string]string{}
	place := func(g *missingGuest) {
		if g.Host == "" && g.Node != "" {
			if h := nodeHosts[strings.TrimPrefix(g.Cluster, "cluster:")+"/"+g.Node]; h != "" {
				g.Host = h
			} else {
				g.Host = byNode[g.Node]
			}
		}
	}
	// Guests named by vmid must all be in the report before anything is written.
	found := map[int]bool{}
	for _, g := range missing {
		place(&g)
		if b.Host == "" || g.Host == b.Host {
			found[g.VMID] = true
		}
	}
	for _, v := range b.VMIDs {
		if !found[v] {
			return request.Unprocessable("vmids", "vmid %d is not among the guests the latest drift report (%s) found missing; `oikos drift --refresh` lists them", v, rep.ID)
		}
	}
	// A cluster comes first: its nodes must be in the graph before their guests.
	if b.All && b.Host == "" {
		if out.Clusters, nodeHosts, out.EdgesCreated, err = a.adoptClusters(ctx, m, rep.Report); err != nil {
			return fmt.Errorf("adopt the clusters: %w", err)
		}
	}
	adopted, skipped, err := a.adoptMissing(ctx, m, missing, b, want, place)
	if err != nil {
		return err
	}
	out.Adopted, out.Skipped = append(out.Adopted, adopted...), append(out.Skipped, skipped...)
	// A cluster the graph did not have was not listed by this report (drift lists only the
	// clusters in the graph; before that, only the hosts): its new nodes' guests are in the
	// next report, asked for now.
	listed := map[string]bool{}
	if cs, ok := clustersOf(rep.Report); ok {
		for _, c := range cs {
			listed[c.Name] = true
		}
	}
	var createdNodes, unlisted []string
	for _, cl := range out.Clusters {
		for _, n := range cl.Nodes {
			if n.Created {
				createdNodes = append(createdNodes, n.Entity)
				if !listed[cl.Entity] {
					unlisted = append(unlisted, n.Entity)
				}
			}
		}
	}
	if len(unlisted) > 0 {
		more, note := a.adoptOnNewNodes(ctx, m, unlisted)
		out.Adopted, out.Note = append(out.Adopted, more...), note
	} else if len(out.Adopted) > 0 || len(createdNodes) > 0 {
		// The stored report still lists them as missing; a fresh one says they are known.
		if _, err := requestDrift(ctx, a.store); err != nil {
			a.log.Warn().Err(err).Msg("request drift discovery after adopting")
		}
	}
	status := http.StatusOK
	if len(out.Adopted) > 0 || len(createdNodes) > 0 || out.EdgesCreated > 0 {
		status = http.StatusCreated
	}
	for _, cl := range out.Clusters {
		if cl.Created {
			status = http.StatusCreated
		}
	}
	return c.JSON(status, out)
}

// adoptMissing adopts the missing guests b asks for, one transaction per host; place fills
// the host of a guest on a cluster node the report did not have in the graph. A guest whose
// node is still not in the graph is skipped, saying why.
func (a *API) adoptMissing(ctx context.Context, m graph.Meta, missing []missingGuest, b adoptBody, want map[int]bool,
	place func(*missingGuest)) ([]Adopted, []Skipped, error) {
	known, err := a.graphGuests(ctx, a.store)
	if err != nil {
		return nil, nil, err
	}
	adopted, skipped := []Adopted{}, []Skipped{}
	byHost := map[string][]missingGuest{}
	for _, g := range missing {
		place(&g)
		if (b.Host != "" && g.Host != b.Host) || (!b.All && !want[g.VMID]) {
			continue
		}
		if g.Host == "" {
			skipped = append(skipped, Skipped{Host: "node " + g.Node, Kind: g.Kind, VMID: g.VMID,
				Reason: fmt.Sprintf("its node %s is not in the graph: `oikos drift adopt --all` adopts %s and its nodes", g.Node, g.Cluster)})
			continue
		}
		if slug := known[guestKey{g.Host, g.Kind, g.VMID}]; slug != "" {
			skipped = append(skipped, Skipped{Host: g.Host, Kind: g.Kind, VMID: g.VMID, Reason: "already in the graph as " + slug})
			continue
		}
		byHost[g.Host] = append(byHost[g.Host], g)
	}
	hosts := make([]string, 0, len(byHost))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		done, err := a.adoptOnHost(ctx, m, h, byHost[h])
		if err != nil {
			return nil, nil, fmt.Errorf("adopt the guests of %s: %w", h, err)
		}
		adopted = append(adopted, done...)
	}
	return adopted, skipped, nil
}

// hostsByNode maps each Proxmox node name the graph has to its proxmox-host's slug.
func (a *API) hostsByNode(ctx context.Context) (map[string]string, error) {
	hs, err := a.store.ProxmoxHosts(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, h := range hs {
		if out[h.Node] == "" {
			out[h.Node] = h.Slug
		}
	}
	return out, nil
}

// adoptOnNewNodes asks for a drift report now that nodes were adopted, waits for it (up to
// DefaultWait), and adopts the missing guests it finds on them. The note says what is left
// when the report did not come, or could not list a node.
func (a *API) adoptOnNewNodes(ctx context.Context, m graph.Meta, nodes []string) ([]Adopted, string) {
	retry := "run `oikos drift adopt --all` again to adopt their guests"
	rep, err := a.awaitDrift(ctx, time.Now().Add(DefaultWait))
	if err != nil {
		return nil, fmt.Sprintf("the nodes were adopted, but listing their guests failed (%v); %s", err, retry)
	}
	missing, err := missingOf(rep.Report)
	if err != nil {
		return nil, err.Error()
	}
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	var mine []missingGuest
	for _, g := range missing {
		if want[g.Host] {
			mine = append(mine, g)
		}
	}
	var notes []string
	for _, h := range hostsOf(rep.Report) {
		if want[h.Host] && !h.Reachable {
			notes = append(notes, fmt.Sprintf("%s could not be listed: %s", h.Host, h.Error))
		}
	}
	adopted, _, err := a.adoptMissing(ctx, m, mine, adoptBody{All: true}, nil, func(*missingGuest) {})
	if err != nil {
		return nil, fmt.Sprintf("adopting the new nodes' guests failed (%v); %s", err, retry)
	}
	if len(adopted) > 0 {
		if _, err := requestDrift(ctx, a.store); err != nil {
			a.log.Warn().Err(err).Msg("request drift discovery after adopting")
		}
	}
	if len(notes) > 0 {
		return adopted, strings.Join(notes, "; ") + "; " + retry
	}
	return adopted, ""
}

type guestKey struct {
	host, kind string
	vmid       int
}

// graphGuests maps every guest the graph has (not destroyed) by host, kind and vmid to its
// slug; the host comes from the host attribute, else the hosts edge, as drift reads it.
func (a *API) graphGuests(ctx context.Context, st *fleetstore.Store) (map[guestKey]string, error) {
	o := a.d.Graph.Ontology()
	guests, err := st.Guests(ctx)
	if err != nil {
		return nil, err
	}
	out := map[guestKey]string{}
	for _, g := range guests {
		kind := ""
		switch {
		case o.IsA(g.Type, "lxc"):
			kind = "lxc"
		case o.IsA(g.Type, "vm"):
			kind = "vm"
		default:
			continue
		}
		vmid, err := attr.Int(g.VMID)
		if err != nil {
			continue
		}
		host := g.HostEdge
		if g.HostAttr != "" {
			host = g.HostAttr
			if !strings.Contains(host, ":") {
				host = "proxmox-host:" + host
			}
		}
		out[guestKey{host, kind, vmid}] = g.Slug
	}
	return out, nil
}

// adoptOnHost creates the guests of one host and their hosts edges in one transaction.
func (a *API) adoptOnHost(ctx context.Context, m graph.Meta, host string, guests []missingGuest) ([]Adopted, error) {
	hostName := strings.TrimPrefix(host, "proxmox-host:")
	var adopted []Adopted
	err := a.store.InTx(ctx, func(st *fleetstore.Store, tx storage.DB) error {
		adopted = adopted[:0]
		// Adopts run one at a time, and what the graph has is read under the lock: two
		// adopts at once must not both create a guest.
		if err := st.LockAdopt(ctx); err != nil {
			return err
		}
		known, err := a.graphGuests(ctx, st)
		if err != nil {
			return err
		}
		taken, err := takenNames(ctx, st)
		if err != nil {
			return err
		}
		var plan graph.BulkPlan
		var slugs []string
		for _, g := range guests {
			if known[guestKey{host, g.Kind, g.VMID}] != "" {
				continue // adopted meanwhile
			}
			name := guestName(g, taken)
			taken[g.Kind+":"+name] = true
			attrs := map[string]any{"vmid": g.VMID, "host": hostName}
			if c := g.Config; c != nil {
				setIf(attrs, "hostname", c.Hostname)
				setIf(attrs, "cores", c.Cores)
				setIf(attrs, "memory_mb", c.MemoryMB)
				setIf(attrs, "swap_mb", c.SwapMB)
				setIf(attrs, "disk_gb", c.DiskGB)
				setIf(attrs, "storage", c.Storage)
				setIf(attrs, "ostype", c.OSType)
				attrs["onboot"] = c.OnBoot
				if len(c.Tags) > 0 {
					tags := make([]any, len(c.Tags))
					for i, t := range c.Tags {
						tags[i] = t
					}
					attrs["tags"] = tags
				}
				if g.Kind == "lxc" {
					attrs["unprivileged"] = c.Unprivileged
				} else {
					attrs["qemu_guest_agent"] = c.GuestAgent
				}
			} else if g.Name != "" {
				attrs["hostname"] = g.Name
			}
			stopped := g.Status != "" && g.Status != "running"
			if stopped {
				attrs["expected_status"] = "stopped"
			}
			slug := g.Kind + ":" + name
			plan.Creates = append(plan.Creates, graph.NewEntity{Type: g.Kind, Name: name, State: "active", Attributes: attrs})
			plan.Edges = append(plan.Edges, graph.NewEdge{Type: "hosts", Source: host, Target: slug})
			slugs = append(slugs, slug)
			adopted = append(adopted, Adopted{Entity: slug, Host: host, Kind: g.Kind, VMID: g.VMID, StoppedOnPurpose: stopped})
		}
		if len(plan.Creates) == 0 {
			return nil
		}
		o := a.d.Graph.Ontology()
		if _, err := a.d.Graph.ApplyBulk(ctx, tx, m, o, plan); err != nil {
			return err
		}
		_, err = a.d.Graph.SyncChecksBulk(ctx, tx, m, o, slugs)
		return err
	})
	return adopted, err
}

func setIf[T comparable](attrs map[string]any, k string, v T) {
	var zero T
	if v != zero {
		attrs[k] = v
	}
}

// takenNames are the slugs in use (any state: a destroyed entity keeps its slug).
func takenNames(ctx context.Context, st *fleetstore.Store) (map[string]bool, error) {
	slugs, err := st.GuestSlugs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(slugs))
	for _, s := range slugs {
		out[s] = true
	}
	return out, nil
}

// guestName is the entity name for a guest: its hostname (pct config) or VM name, made a
// valid name; "ct-<vmid>" or "vm-<vmid>" when it has none; "-<vmid>" appended when another
// guest already has the name (two clusters both running a "debian").
func guestName(g missingGuest, taken map[string]bool) string {
	name := g.Name
	if g.Config != nil && g.Config.Hostname != "" {
		name = g.Config.Hostname
	}
	name = cleanName(name)
	prefix := "ct"
	if g.Kind == "vm" {
		prefix = "vm"
	}
	if name == "" {
		name = prefix + "-" + strconv.Itoa(g.VMID)
	}
	// A name in use gets the vmid, then a counter, until it is free.
	for i, base := 1, name; taken[g.Kind+":"+name]; i++ {
		if i == 1 {
			name = base + "-" + strconv.Itoa(g.VMID)
		} else {
			name = base + "-" + strconv.Itoa(g.VMID) + "-" + strconv.Itoa(i)
		}
	}
	return name
}

// cleanName lower-cases a hostname and keeps letters, digits, dots, dashes and underscores.
func cleanName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return strings.Trim(b.String(), "-.")
}
