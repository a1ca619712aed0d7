-- +goose Up
-- The gated execution path: executions (what was asked, what the gate decided, what ran),
-- approvals (one per queued execution), approval windows (assent per session, destructive per
-- target and session), output chunks, pinned SSH host keys and scheduler leases.

CREATE TABLE executions (
    id               uuid PRIMARY KEY,
    target_id        uuid NOT NULL REFERENCES entities(id),
    target_slug      text NOT NULL,
    -- action is "run" for a shell command, else a typed action (pct_create, restart, ...).
    action           text NOT NULL DEFAULT 'run',
    command          text NOT NULL,
    params           jsonb NOT NULL DEFAULT '{}'::jsonb,
    purpose          text NOT NULL DEFAULT '',
    declared_risk    text CHECK (declared_risk IN ('read_only', 'reversible_low', 'config_mutation', 'destructive')),
    risk_class       text NOT NULL CHECK (risk_class IN ('read_only', 'reversible_low', 'config_mutation', 'destructive')),
    reasons          jsonb NOT NULL DEFAULT '[]'::jsonb,
    status           text NOT NULL CHECK (status IN ('pending_approval', 'approved', 'running', 'completed', 'failed',
                                                     'timed_out', 'interrupted', 'denied', 'revoked', 'cancelled')),
    -- Which window (assent | destructive) or rule (auto) let it run without a new approval.
    authorised_by    text NOT NULL DEFAULT '',
    approval_id      uuid,
    session_id       text,
    correlation_id   text NOT NULL DEFAULT '',
    requested_by     text NOT NULL,
    -- Identical requests (target, action, command, params, session) share a dedup key.
    dedup_key        text NOT NULL,
    timeout_seconds  integer NOT NULL DEFAULT 600 CHECK (timeout_seconds > 0),
    exit_code        integer,
    -- The tail of the output (capped) for quick reads; the whole stream is in execution_logs.
    output           bytea NOT NULL DEFAULT ''::bytea,
    output_truncated boolean NOT NULL DEFAULT false,
    result           jsonb,
    error            text NOT NULL DEFAULT '',
    claimed_by       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz
);
CREATE INDEX executions_status_idx ON executions (status, created_at);
CREATE INDEX executions_target_idx ON executions (target_id, id);
CREATE INDEX executions_session_idx ON executions (session_id, id);
CREATE INDEX executions_correlation_idx ON executions (correlation_id, id);
-- Dedup: at most one pending execution per identical request.
CREATE UNIQUE INDEX executions_pending_dedup_uniq ON executions (dedup_key) WHERE status = 'pending_approval';

CREATE TABLE approvals (
    id            uuid PRIMARY KEY,
    execution_id  uuid NOT NULL UNIQUE REFERENCES executions(id) ON DELETE CASCADE,
    session_id    text,
    target_id     uuid NOT NULL REFERENCES entities(id),
    risk_class    text NOT NULL CHECK (risk_class IN ('read_only', 'reversible_low', 'config_mutation', 'destructive')),
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied', 'revoked', 'expired')),
    requested_by  text NOT NULL,
    requested_at  timestamptz NOT NULL DEFAULT now(),
    decided_by    text,
    decided_at    timestamptz,
    via           text CHECK (via IN ('button', 'chat_assent', 'typed_confirmation', 'api')),
    message_id    text,
    reason        text NOT NULL DEFAULT ''
);
ALTER TABLE executions ADD CONSTRAINT executions_approval_fk FOREIGN KEY (approval_id) REFERENCES approvals(id) DEFERRABLE INITIALLY DEFERRED;
-- Approval flood: one pending approval per session.
CREATE UNIQUE INDEX approvals_pending_session_uniq ON approvals (session_id) WHERE status = 'pending' AND session_id IS NOT NULL;
CREATE INDEX approvals_status_idx ON approvals (status, requested_at);

CREATE TABLE approval_windows (
    id           uuid PRIMARY KEY,
    kind         text NOT NULL CHECK (kind IN ('assent', 'destructive')),
    session_id   text NOT NULL,
    -- Destructive windows are scoped to one target; assent windows cover the session.
    target_id    uuid REFERENCES entities(id),
    approval_id  uuid REFERENCES approvals(id),
    opened_by    text NOT NULL,
    via          text NOT NULL,
    opened_at    timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    closed_at    timestamptz,
    CONSTRAINT approval_windows_scope CHECK ((kind = 'destructive') = (target_id IS NOT NULL))
);
CREATE INDEX approval_windows_lookup_idx ON approval_windows (session_id, kind, expires_at);

-- Output as it streams; bytes, so NUL and invalid UTF-8 survive.
CREATE TABLE execution_logs (
    id            bigserial PRIMARY KEY,
    execution_id  uuid NOT NULL REFERENCES executions(id) ON DELETE CASCADE,
    seq           integer NOT NULL,
    stream        text NOT NULL CHECK (stream IN ('stdout', 'stderr', 'system')),
    data          bytea NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    UNIQUE (execution_id, seq)
);

-- SSH host keys pinned on first use; a changed key is refused.
CREATE TABLE ssh_host_keys (
    address      text PRIMARY KEY,
    key_type     text NOT NULL,
    public_key   bytea NOT NULL,
    fingerprint  text NOT NULL,
    first_seen   timestamptz NOT NULL DEFAULT now(),
    last_seen    timestamptz NOT NULL DEFAULT now()
);

-- Leases let several schedulers share the fleet: all work of a host goes through the
-- scheduler holding its lease (and its one SSH connection).
CREATE TABLE scheduler_leases (
    resource     text PRIMARY KEY,
    holder       text NOT NULL,
    acquired_at  timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);

-- +goose Down
DROP TABLE scheduler_leases;
DROP TABLE ssh_host_keys;
DROP TABLE execution_logs;
DROP TABLE approval_windows;
ALTER TABLE executions DROP CONSTRAINT executions_approval_fk;
DROP TABLE approvals;
DROP TABLE executions;
