-- +goose Up
-- lease_unit as the resolver finds a target's machine (shared/remote, scheduler/internal/fleet):
-- a guest's owning Proxmox host by its host attribute (name or slug, not destroyed), else its
-- newest live hosts edge; anything else through its runs-on edges, up to three steps (a service
-- in a container on a docker LXC); a machine itself.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION lease_unit(entity uuid) RETURNS text LANGUAGE sql STABLE AS $$
    WITH RECURSIVE walk(id, slug, attributes, depth) AS (
        SELECT e.id, e.slug, e.attributes, 0 FROM entities e WHERE e.id = entity
        UNION ALL
        SELECT t.id, t.slug, t.attributes, w.depth + 1 FROM walk w
        JOIN LATERAL (SELECT r.target_id FROM relationships r WHERE r.source_id = w.id AND r.type = 'runs-on'
                      AND r.valid_to IS NULL ORDER BY r.valid_from DESC LIMIT 1) r ON true
        JOIN entities t ON t.id = r.target_id AND t.state <> 'destroyed'
        WHERE w.depth < 3 AND NOT (w.attributes ? 'vmid')
    ), m AS (
        -- the first guest on the way, else the last thing reached
        SELECT * FROM walk ORDER BY (attributes ? 'vmid') DESC, depth DESC LIMIT 1
    )
    SELECT 'host:' || coalesce(
        (SELECT h.slug FROM entities h WHERE m.attributes ? 'vmid' AND h.type = 'proxmox-host' AND h.state <> 'destroyed'
            AND (h.slug = m.attributes->>'host' OR h.name = m.attributes->>'host') ORDER BY h.slug LIMIT 1),
        (SELECT h.slug FROM relationships r JOIN entities h ON h.id = r.source_id
            WHERE m.attributes ? 'vmid' AND r.target_id = m.id AND r.type = 'hosts' AND r.valid_to IS NULL
              AND h.state <> 'destroyed'
            ORDER BY r.valid_from DESC LIMIT 1),
        m.slug)
    FROM m
$$;
-- +goose StatementEnd

-- +goose Down
-- (00013's definition is restored by its own Down/Up; nothing to undo here but the body.)
SELECT 1;
