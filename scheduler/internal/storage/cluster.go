package storage

import (
	"context"
	"fmt"
)

// The cluster a Proxmox host being added belongs to (migrations/sql/00018_cluster_nodes.sql):
// the members its /cluster/status lists, and their host keys pinned on its word.

const qVouchHostKey = `
WITH ins AS (
    INSERT INTO ssh_host_keys (address, key_type, public_key, fingerprint, last_seen, vouched_by, vouched_at, vouched_source)
    VALUES ($1, $2, $3, $4, now(), $5, now(), $6)
    ON CONFLICT (address) DO NOTHING
    RETURNING public_key
)
SELECT true, public_key FROM ins
UNION ALL
SELECT false, public_key FROM ssh_host_keys WHERE address = $1 AND NOT EXISTS (SELECT 1 FROM ins)`

// VouchHostKey pins key for addr on the word of the member at vouchedBy (its cluster file
// source listed it), unless a key is pinned for addr already: then it pins nothing and
// returns the pinned key, for the caller to compare (a different one is refused, never
// replaced).
func (s *Store) VouchHostKey(ctx context.Context, addr, keyType string, key []byte, fingerprint, vouchedBy, source string) (inserted bool, pinned []byte, err error) {
	if err := s.db.QueryRow(ctx, qVouchHostKey, addr, keyType, key, fingerprint, vouchedBy, source).Scan(&inserted, &pinned); err != nil {
		return false, nil, fmt.Errorf("vouch the host key of %s: %w", addr, err)
	}
	return inserted, pinned, nil
}

// ClusterNode is one cluster_nodes row.
type ClusterNode struct {
	Cluster, Node, Address     string
	NodeID                     int
	Online, Local, Quorate     bool
	ClusterNodes               int
	Fingerprint, KeyType       string
	KeyStatus, KeyError        string
	VouchedBy, User, ConnectID string
}

const qUpsertClusterNode = `
INSERT INTO cluster_nodes (cluster, node, address, nodeid, online, local, quorate, cluster_nodes, fingerprint, key_type,
    key_status, key_error, vouched_by, ssh_user, connect_id, discovered_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, NULLIF($15, '')::uuid, now())
ON CONFLICT (cluster, node) DO UPDATE SET address = EXCLUDED.address, nodeid = EXCLUDED.nodeid, online = EXCLUDED.online,
    local = EXCLUDED.local, quorate = EXCLUDED.quorate, cluster_nodes = EXCLUDED.cluster_nodes,
    fingerprint = EXCLUDED.fingerprint, key_type = EXCLUDED.key_type, key_status = EXCLUDED.key_status,
    key_error = EXCLUDED.key_error, vouched_by = EXCLUDED.vouched_by, ssh_user = EXCLUDED.ssh_user,
    connect_id = EXCLUDED.connect_id, discovered_at = now()`

// UpsertClusterNode records what the latest discovery found about one member.
func (s *Store) UpsertClusterNode(ctx context.Context, n ClusterNode) error {
	_, err := s.db.Exec(ctx, qUpsertClusterNode, n.Cluster, n.Node, n.Address, n.NodeID, n.Online, n.Local, n.Quorate,
		n.ClusterNodes, n.Fingerprint, n.KeyType, n.KeyStatus, n.KeyError, n.VouchedBy, n.User, n.ConnectID)
	if err != nil {
		return fmt.Errorf("record cluster node %s/%s: %w", n.Cluster, n.Node, err)
	}
	return nil
}

const qPruneClusterNodes = `DELETE FROM cluster_nodes WHERE cluster = $1 AND NOT (node = ANY($2::text[]))`

// PruneClusterNodes forgets the members of cluster that its latest discovery no longer
// lists (a node removed with pvecm delnode).
func (s *Store) PruneClusterNodes(ctx context.Context, cluster string, nodes []string) error {
	_, err := s.db.Exec(ctx, qPruneClusterNodes, cluster, nodes)
	return err
}
