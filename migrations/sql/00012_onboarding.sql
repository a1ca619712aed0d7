-- +goose Up
-- Onboarding a real fleet (api/internal/onboard, scheduler/internal/onboard).

-- The public keys the schedulers connect to the fleet with, so `oikos ssh-key` can print the
-- line an operator adds to authorized_keys. One row per key (a restarted scheduler keeps its
-- key and its row); only public halves are stored.
CREATE TABLE scheduler_keys (
    fingerprint     text PRIMARY KEY,
    authorized_key  text NOT NULL,
    key_type        text NOT NULL,
    scheduler_id    text NOT NULL,
    first_seen      timestamptz NOT NULL DEFAULT now(),
    last_seen       timestamptz NOT NULL DEFAULT now()
);

-- A request to connect to a machine being added (`oikos add proxmox-host`). The api writes
-- the row and NOTIFYs oikos_connect; a scheduler claims it, dials, and writes the outcome:
-- the host key it was offered (awaiting the operator's confirmation, never pinned before),
-- or what it learned over the connection (facts), or the error. The api applies the outcome
-- to the graph (finalized_at), so the graph has one writer.
CREATE TABLE host_connects (
    id                   uuid PRIMARY KEY,
    entity_id            uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    address              text NOT NULL,
    ssh_user             text NOT NULL,
    -- The fingerprint the operator vouched for: up front (--fingerprint) or by confirming
    -- the offered one. Empty: capture the offered key and ask.
    expect_fingerprint   text NOT NULL DEFAULT '',
    status               text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'connecting', 'awaiting_confirmation', 'connected', 'failed')),
    offered_fingerprint  text NOT NULL DEFAULT '',
    offered_key_type     text NOT NULL DEFAULT '',
    error                text NOT NULL DEFAULT '',
    facts                jsonb NOT NULL DEFAULT '{}'::jsonb,
    drift_report_id      uuid,
    requested_by         text NOT NULL,
    claimed_by           text NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    finalized_at         timestamptz
);
CREATE INDEX host_connects_pending_idx ON host_connects (created_at) WHERE status IN ('pending', 'connecting');
CREATE INDEX host_connects_entity_idx ON host_connects (entity_id, created_at DESC);

-- +goose Down
DROP TABLE host_connects;
DROP TABLE scheduler_keys;
