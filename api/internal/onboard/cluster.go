package onboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/fleetstore"
	"github.com/oikos-hq/oikos/shared/hostconnect"
)

// A Proxmox host added with `oikos add` that is a cluster member brings its cluster: the
// scheduler read it over the connection the operator vouched for and pinned the other
// members' keys on its word (cluster_nodes). The api shows it in the add's answer and at GET
// /clusters, and `drift adopt --all` makes the cluster, its nodes, their member-of edges
// and their guests entities.

// ClusterNode is a member as the add found it; Host is its proxmox-host entity ("" while the
// graph has none).
type ClusterNode = fleetstore.ClusterNode

// Cluster is a Proxmox cluster as the latest add of one of its members found it.
type Cluster struct {
	Name string `json:"name"`
	// Entity is the cluster entity's slug (cluster:NAME); InGraph says whether it exists.
	Entity       string        `json:"entity"`
	InGraph      bool          `json:"in_graph"`
	Quorate      bool          `json:"quorate"`
	NodeCount    int           `json:"node_count"`
	VouchedBy    string        `json:"vouched_by"`
	DiscoveredAt time.Time     `json:"discovered_at"`
	Nodes        []ClusterNode `json:"nodes"`
}

// clusterSlug is the entity slug of the cluster named name.
func clusterSlug(name string) string { return "cluster:" + cleanName(name) }

// clusters reads the stored clusters (name "" for all), grouped.
func (a *API) clusters(ctx context.Context, st *fleetstore.Store, name string) ([]Cluster, error) {
	rows, err := st.ClusterNodes(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []Cluster
	for _, n := range rows {
		if len(out) == 0 || out[len(out)-1].Name != n.Cluster {
			out = append(out, Cluster{Name: n.Cluster, Entity: clusterSlug(n.Cluster), Quorate: n.Quorate,
				NodeCount: n.ClusterNodes, Nodes: []ClusterNode{}})
		}
		c := &out[len(out)-1]
		c.Nodes = append(c.Nodes, n)
		if n.DiscoveredAt.After(c.DiscoveredAt) {
			c.DiscoveredAt, c.VouchedBy = n.DiscoveredAt, n.VouchedBy
		}
	}
	for i := range out {
		taken, err := st.SlugTaken(ctx, out[i].Entity)
		if err != nil {
			return nil, err
		}
		if taken {
			ent, err := st.Entity(ctx, out[i].Entity)
			out[i].InGraph = err == nil && ent.State != "destroyed"
		}
	}
	return out, nil
}

// listClusters answers GET /clusters.
func (a *API) listClusters(c echo.Context) error {
	cs, err := a.clusters(c.Request().Context(), a.store, "")
	if err != nil {
		return err
	}
	if cs == nil {
		cs = []Cluster{}
	}
	return c.JSON(http.StatusOK, map[string]any{"items": cs})
}

// clusterOf is the cluster a connection found, nil when none.
func (a *API) clusterOf(ctx context.Context, cn Connect) (*Cluster, error) {
	if cn.Status != hostconnect.StatusConnected || cn.Facts.Cluster == "" {
		return nil, nil
	}
	cs, err := a.clusters(ctx, a.store, cn.Facts.Cluster)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	return &cs[0], nil
}

// reportCluster is a cluster as the drift report lists it (scheduler/internal/drift asks
// each cluster once): name is the cluster entity's slug, and each node's host is its
// proxmox-host's slug ("" when the graph has none).
type reportCluster struct {
	Name  string `json:"name"`
	Nodes []struct {
		Node    string `json:"node"`
		Address string `json:"address"`
		Online  bool   `json:"online"`
		Host    string `json:"host"`
	} `json:"nodes"`
}

// clustersOf reads the report's clusters; listed is false for a report that has no such
// field (a scheduler that lists each host apart).
func clustersOf(report map[string]any) (cs []reportCluster, listed bool) {
	v, ok := report["clusters"]
	if !ok || v == nil {
		return nil, false
	}
	raw, _ := json.Marshal(v)
	_ = json.Unmarshal(raw, &cs)
	return cs, true
}

// AdoptedCluster is a cluster drift adopt --all brought into the graph (or found there).
type AdoptedCluster struct {
	Entity  string        `json:"entity"`
	Created bool          `json:"created"`
	Nodes   []AdoptedNode `json:"nodes"`
}

// AdoptedNode is one member: the proxmox-host it is (created now, or in the graph already),
// or why it was left out.
type AdoptedNode struct {
	Node    string `json:"node"`
	Entity  string `json:"entity,omitempty"`
	Address string `json:"address,omitempty"`
	Created bool   `json:"created"`
	Skipped string `json:"skipped,omitempty"`
}

// clusterMember merges what the add stored and what the report says about one node.
type clusterMember struct {
	node, address, user, keyStatus, keyError, host string
}

// adoptClusters makes every known cluster an entity, every member whose host key is pinned a
// proxmox-host (with its address), and the member-of edges, in one transaction through the
// graph service. It returns what it did and the proxmox-host slug of every member by
// "cluster/node", and how many member-of edges it made. A member whose key nobody vouched for is left out, saying how to add it:
// adopting it would make the scheduler trust its key on first use.
func (a *API) adoptClusters(ctx context.Context, m graph.Meta, report map[string]any) ([]AdoptedCluster, map[string]string, int, error) {
	byName := map[string]map[string]*clusterMember{}
	var order []string
	member := func(cluster, node string) *clusterMember {
		cluster = strings.TrimPrefix(cluster, "cluster:")
		if byName[cluster] == nil {
			byName[cluster] = map[string]*clusterMember{}
			order = append(order, cluster)
		}
		if byName[cluster][node] == nil {
			byName[cluster][node] = &clusterMember{node: node}
		}
		return byName[cluster][node]
	}
	stored, err := a.clusters(ctx, a.store, "")
	if err != nil {
		return nil, nil, 0, err
	}
	counts := map[string]int{}
	for _, c := range stored {
		counts[c.Name] = c.NodeCount
		for _, n := range c.Nodes {
			cm := member(c.Name, n.Node)
			cm.address, cm.user, cm.keyStatus, cm.keyError, cm.host = n.Address, n.User, n.KeyStatus, n.KeyError, n.Host
		}
	}
	listed, _ := clustersOf(report)
	for _, c := range listed {
		for _, n := range c.Nodes {
			cm := member(c.Name, n.Node)
			if cm.host == "" {
				cm.host = n.Host
			}
			if cm.address == "" && n.Address != "" {
				cm.address = n.Address
			}
		}
	}
	sort.Strings(order)
	var out []AdoptedCluster
	hosts := map[string]string{}
	edges := 0
	err = a.store.InTx(ctx, func(st *fleetstore.Store, tx storage.DB) error {
		out, hosts, edges = out[:0], map[string]string{}, 0
		if err := st.LockAdopt(ctx); err != nil {
			return err
		}
		graphHosts, err := st.ProxmoxHosts(ctx)
		if err != nil {
			return err
		}
		byNode := map[string]string{}
		for _, h := range graphHosts {
			if byNode[h.Node] == "" {
				byNode[h.Node] = h.Slug
			}
		}
		var plan graph.BulkPlan
		var created []string
		for _, name := range order {
			slug := clusterSlug(name)
			ac := AdoptedCluster{Entity: slug, Nodes: []AdoptedNode{}}
			exists, err := st.SlugTaken(ctx, slug)
			if err != nil {
				return err
			}
			if !exists {
				attrs := map[string]any{}
				if n := max(counts[name], len(byName[name])); n > 0 {
					attrs["quorum_votes"] = n/2 + 1 // corosync's votequorum: a majority of one vote each
				}
				plan.Creates = append(plan.Creates, graph.NewEntity{Type: "cluster", Name: cleanName(name), State: "active",
					Attributes: attrs})
				ac.Created = true
			}
			nodes := make([]string, 0, len(byName[name]))
			for n := range byName[name] {
				nodes = append(nodes, n)
			}
			sort.Strings(nodes)
			for _, n := range nodes {
				cm := byName[name][n]
				an := AdoptedNode{Node: n, Address: cm.address}
				host := byNode[n]
				if host == "" {
					host = cm.host
				}
				switch {
				case host != "":
					an.Entity = host
				default:
					ne, why := newNodeEntity(cm)
					if why != "" {
						an.Skipped = why
						break
					}
					ne.Name = cleanName(n)
					hostSlug := "proxmox-host:" + ne.Name
					taken, err := st.SlugTaken(ctx, hostSlug)
					if err != nil {
						return err
					}
					if taken {
						an.Skipped = hostSlug + " exists already (destroyed, or not this node); add it with oikos add proxmox-host"
						break
					}
					plan.Creates = append(plan.Creates, ne)
					created = append(created, hostSlug)
					an.Entity, an.Created = hostSlug, true
					host = hostSlug
				}
				if host != "" {
					hosts[name+"/"+n] = host
					plan.Edges = append(plan.Edges, graph.NewEdge{Type: "member-of", Source: host, Target: slug})
				}
				ac.Nodes = append(ac.Nodes, an)
			}
			out = append(out, ac)
		}
		if len(plan.Creates) == 0 && len(plan.Edges) == 0 {
			return nil
		}
		o := a.d.Graph.Ontology()
		res, err := a.d.Graph.ApplyBulk(ctx, tx, m, o, plan)
		if err != nil {
			return err
		}
		edges = res.EdgesCreated
		if len(created) > 0 {
			_, err = a.d.Graph.SyncChecksBulk(ctx, tx, m, o, created)
		}
		return err
	})
	return out, hosts, edges, err
}

// newNodeEntity is the proxmox-host a member becomes, or why it cannot: only a member whose
// key is pinned (the operator's, or vouched for by the cluster) is adopted.
func newNodeEntity(cm *clusterMember) (graph.NewEntity, string) {
	switch cm.keyStatus {
	case hostconnect.KeyVouched, hostconnect.KeyPinned, hostconnect.KeyConnected:
	case hostconnect.KeyConflict:
		return graph.NewEntity{}, "its host key was refused: " + cm.keyError
	case "":
		return graph.NewEntity{}, fmt.Sprintf("no host key was vouched for it; add it with oikos add proxmox-host %s --address IP", cm.node)
	default:
		return graph.NewEntity{}, fmt.Sprintf("%s; add it with oikos add proxmox-host %s --address IP", cm.keyError, cm.node)
	}
	host, portS, err := net.SplitHostPort(cm.address)
	ip, perr := netip.ParseAddr(host)
	port, _ := strconv.Atoi(portS)
	if err != nil || perr != nil || !ip.Is4() || port <= 0 {
		return graph.NewEntity{}, fmt.Sprintf("its address %q is not an IPv4 address and port", cm.address)
	}
	user := cm.user
	if user == "" {
		user = "root"
	}
	attrs := map[string]any{addressAttribute(ip): ip.String(), "ssh_port": port, "user": user, "node": cm.node,
		"hostname": cm.node}
	return graph.NewEntity{Type: "proxmox-host", State: "active", Attributes: attrs}, ""
}
