-- +goose Up
-- A drift discovery's listings, one row per Proxmox host, each written by the scheduler that
-- holds the host's lease (scheduler/internal/drift): the scheduler that claimed the request
-- asks every scheduler to list the hosts it holds, then assembles the report from these rows,
-- so a host is only ever reached through its holder's one connection.
CREATE TABLE drift_listings (
    report_id    uuid NOT NULL REFERENCES drift_reports (id) ON DELETE CASCADE,
    host_slug    text NOT NULL,
    scheduler_id text NOT NULL,
    listed_at    timestamptz NOT NULL DEFAULT now(),
    listing      jsonb NOT NULL,
    PRIMARY KEY (report_id, host_slug)
);

-- +goose Down
DROP TABLE drift_listings;
