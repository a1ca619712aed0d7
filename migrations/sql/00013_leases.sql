-- +goose Up
-- Several schedulers share a fleet (scheduler/internal/leases). A unit of work (one SSH
-- host: "host:<slug>"; the HTTP/TCP check set: "net") is leased in scheduler_leases; the
-- generation grows with every change of holder, so a write can be fenced by it.
ALTER TABLE scheduler_leases ADD COLUMN generation bigint NOT NULL DEFAULT 1;

-- The schedulers alive now: each renews its row with its leases; units are spread over the
-- live members by rendezvous hashing, so every member computes the same assignment.
CREATE TABLE scheduler_members (
    id            text PRIMARY KEY,
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);

-- lease_unit names the unit whose holder does the work for an entity: its owning Proxmox
-- host for a guest (the host attribute, by name or slug, else the hosts edge), the machine
-- itself for a machine, and for anything else (a service) what it runs on, one step.
-- +goose StatementBegin
CREATE FUNCTION lease_unit(entity uuid) RETURNS text LANGUAGE sql STABLE AS $$
    WITH e0 AS (
        SELECT e.id, e.slug, e.type, e.attributes FROM entities e WHERE e.id = entity
    ), e1 AS (
        SELECT * FROM e0 WHERE e0.attributes ? 'vmid' OR NOT EXISTS (
            SELECT 1 FROM relationships r WHERE r.source_id = e0.id AND r.type = 'runs-on' AND r.valid_to IS NULL)
        UNION ALL
        SELECT t.id, t.slug, t.type, t.attributes FROM e0
        JOIN LATERAL (SELECT r.target_id FROM relationships r WHERE r.source_id = e0.id AND r.type = 'runs-on'
                      AND r.valid_to IS NULL ORDER BY r.valid_from LIMIT 1) r ON true
        JOIN entities t ON t.id = r.target_id
        WHERE NOT (e0.attributes ? 'vmid')
    )
    SELECT 'host:' || coalesce(
        (SELECT h.slug FROM entities h WHERE e1.attributes ? 'vmid' AND h.type = 'proxmox-host'
            AND (h.slug = e1.attributes->>'host' OR h.name = e1.attributes->>'host') ORDER BY h.slug LIMIT 1),
        (SELECT h.slug FROM relationships r JOIN entities h ON h.id = r.source_id
            WHERE e1.attributes ? 'vmid' AND r.target_id = e1.id AND r.type = 'hosts' AND r.valid_to IS NULL
            ORDER BY r.valid_from LIMIT 1),
        e1.slug)
    FROM e1 LIMIT 1
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION lease_unit(uuid);
DROP TABLE scheduler_members;
ALTER TABLE scheduler_leases DROP COLUMN generation;
