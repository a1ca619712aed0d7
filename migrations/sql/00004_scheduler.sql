-- +goose Up
-- The scheduler's own tables: the latest result of every check (from which a target's health
-- is combined, so several schedulers sharing the fleet combine the same rows), and the stored
-- drift discovery reports.

-- One row per check: its latest result. entity_status of the target is recomputed from these
-- rows (worst of the target's enabled checks), never from one check alone.
CREATE TABLE check_results (
    check_id     uuid PRIMARY KEY REFERENCES check_defs(id) ON DELETE CASCADE,
    target_id    uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    health       text NOT NULL CHECK (health IN ('up', 'degraded', 'down', 'unknown')),
    reason       text NOT NULL DEFAULT '',
    -- error_class says why a check could not observe its target (resolution, unreachable,
    -- auth, timeout, probe, parse, config); '' when it did.
    error_class  text NOT NULL DEFAULT '',
    summary      jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- at: the latest run; observed_at: the latest run that observed the target itself (a guest
    -- behind an unreachable host is not observed); since: when the current health began;
    -- first_at: the first run ever.
    at           timestamptz NOT NULL,
    observed_at  timestamptz,
    since        timestamptz NOT NULL,
    first_at     timestamptz NOT NULL,
    runs         bigint NOT NULL DEFAULT 1
);
CREATE INDEX check_results_target_idx ON check_results (target_id);
CREATE INDEX check_results_health_idx ON check_results (health, since);

-- Drift discovery (BEHAVIOURS S7): pct list / qm list on every Proxmox host against the graph.
-- request_ids lists the on-demand requests (NOTIFY oikos_drift) this run answered.
CREATE TABLE drift_reports (
    id            uuid PRIMARY KEY,
    trigger       text NOT NULL CHECK (trigger IN ('scheduled', 'requested')),
    request_ids   uuid[] NOT NULL DEFAULT '{}',
    status        text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    missing_count integer NOT NULL DEFAULT 0,
    ghost_count   integer NOT NULL DEFAULT 0,
    report        jsonb NOT NULL DEFAULT '{}'::jsonb,
    error         text NOT NULL DEFAULT '',
    claimed_by    text NOT NULL DEFAULT ''
);
CREATE INDEX drift_reports_finished_idx ON drift_reports (status, finished_at DESC);
CREATE INDEX drift_reports_requests_idx ON drift_reports USING gin (request_ids);

-- +goose Down
DROP TABLE drift_reports;
DROP TABLE check_results;
