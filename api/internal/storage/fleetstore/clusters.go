package fleetstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClusterNode is a member of a Proxmox cluster as the latest add of one of its members found
// it (cluster_nodes, written by the scheduler), with the proxmox-host entity the graph has
// for its node name ("" when none).
type ClusterNode struct {
	Cluster      string    `json:"-"`
	Node         string    `json:"node"`
	Address      string    `json:"address"`
	NodeID       int       `json:"nodeid"`
	Online       bool      `json:"online"`
	Local        bool      `json:"local"`
	Quorate      bool      `json:"-"`
	ClusterNodes int       `json:"-"`
	Fingerprint  string    `json:"fingerprint,omitempty"`
	KeyType      string    `json:"key_type,omitempty"`
	KeyStatus    string    `json:"key_status"`
	KeyError     string    `json:"key_error,omitempty"`
	VouchedBy    string    `json:"vouched_by"`
	User         string    `json:"user"`
	DiscoveredAt time.Time `json:"discovered_at"`
	Host         string    `json:"host"`
}

const qClusterNodes = `
SELECT c.cluster, c.node, c.address, c.nodeid, c.online, c.local, c.quorate, c.cluster_nodes, c.fingerprint, c.key_type,
       c.key_status, c.key_error, c.vouched_by, c.ssh_user, c.discovered_at,
       coalesce((SELECT e.slug FROM entities e
                 WHERE e.type = 'proxmox-host' AND e.state <> 'destroyed' AND coalesce(e.attributes->>'node', e.name) = c.node
                 ORDER BY e.created_at LIMIT 1), '')
FROM cluster_nodes c
WHERE $1::text = '' OR c.cluster = $1
ORDER BY c.cluster, c.nodeid, c.node`

// ClusterNodes lists the members of cluster ("" for every cluster), by cluster and node id.
func (s *Store) ClusterNodes(ctx context.Context, cluster string) ([]ClusterNode, error) {
	rows, err := s.db.Query(ctx, qClusterNodes, cluster)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ClusterNode, error) {
		var n ClusterNode
		err := r.Scan(&n.Cluster, &n.Node, &n.Address, &n.NodeID, &n.Online, &n.Local, &n.Quorate, &n.ClusterNodes,
			&n.Fingerprint, &n.KeyType, &n.KeyStatus, &n.KeyError, &n.VouchedBy, &n.User, &n.DiscoveredAt, &n.Host)
		return n, err
	})
}

// ProxmoxHost is a proxmox-host entity that is not destroyed, by its node name.
type ProxmoxHost struct{ Slug, Node, State string }

const qProxmoxHosts = `SELECT slug, coalesce(attributes->>'node', name), state FROM entities
WHERE type = 'proxmox-host' AND state <> 'destroyed' ORDER BY created_at`

// ProxmoxHosts lists the Proxmox hosts the graph has, oldest first.
func (s *Store) ProxmoxHosts(ctx context.Context) ([]ProxmoxHost, error) {
	rows, err := s.db.Query(ctx, qProxmoxHosts)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProxmoxHost, error) {
		var h ProxmoxHost
		err := r.Scan(&h.Slug, &h.Node, &h.State)
		return h, err
	})
}

const qEntitySlugTaken = `SELECT EXISTS (SELECT 1 FROM entities WHERE slug = $1)`

// SlugTaken reports whether an entity (in any state: a destroyed one keeps its slug) has slug.
func (s *Store) SlugTaken(ctx context.Context, slug string) (bool, error) {
	var taken bool
	err := s.db.QueryRow(ctx, qEntitySlugTaken, slug).Scan(&taken)
	return taken, err
}
