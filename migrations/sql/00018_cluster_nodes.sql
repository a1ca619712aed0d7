-- +goose Up
-- Adding a cluster once (issue 30): `oikos add proxmox-host` on a member of a Proxmox cluster
-- reads the cluster over the connection the operator just vouched for (pvesh get
-- /cluster/status, /etc/pve/priv/known_hosts) and pins the other members' host keys from
-- it. The scheduler writes both tables; the api reads them (the add's answer, GET
-- /clusters, drift adopt --all).

-- Where a pinned key came from. NULL vouched_by: trusted on first use or confirmed by an
-- operator (oikos add). Set: the cluster file of the member at vouched_by (ip:port, itself
-- pinned by an operator) listed this key for the address. A key that later differs is
-- refused like any other pinned key.
ALTER TABLE ssh_host_keys
    ADD COLUMN vouched_by     text,
    ADD COLUMN vouched_at     timestamptz,
    ADD COLUMN vouched_source text;

-- One row per member of a cluster, as the latest add of one of its members found it.
CREATE TABLE cluster_nodes (
    cluster        text NOT NULL,
    node           text NOT NULL,
    address        text NOT NULL,            -- ip:port the scheduler dials
    nodeid         integer NOT NULL DEFAULT 0,
    online         boolean NOT NULL,
    local          boolean NOT NULL,         -- the member that answered
    quorate        boolean NOT NULL,
    cluster_nodes  integer NOT NULL,         -- members the cluster counts
    fingerprint    text NOT NULL DEFAULT '',
    key_type       text NOT NULL DEFAULT '',
    -- connected: the member that answered (its key is the operator's); vouched: pinned now
    -- from the cluster's file; pinned: the same key was pinned already; conflict: another
    -- key is pinned for the address (refused, host_key_changed raised); missing: the
    -- cluster's files list no key for the node.
    key_status     text NOT NULL CHECK (key_status IN ('connected', 'vouched', 'pinned', 'conflict', 'missing')),
    key_error      text NOT NULL DEFAULT '',
    vouched_by     text NOT NULL,            -- slug of the member that answered
    ssh_user       text NOT NULL,
    connect_id     uuid REFERENCES host_connects(id) ON DELETE SET NULL,
    discovered_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, node)
);
CREATE INDEX cluster_nodes_connect_idx ON cluster_nodes (connect_id);

-- +goose Down
DROP TABLE cluster_nodes;
ALTER TABLE ssh_host_keys DROP COLUMN vouched_source, DROP COLUMN vouched_at, DROP COLUMN vouched_by;
