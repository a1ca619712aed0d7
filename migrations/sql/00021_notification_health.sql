-- +goose NO TRANSACTION
-- +goose Up
-- A notification channel's health (issue #32): how many attempts in a row failed since its
-- last success, when the last one failed, and since when it counts as failing (set once
-- consecutive_failures reached the api's threshold, OIKOS_NOTIFY_FAILING_AFTER; cleared by
-- the next success). failing_since is what makes the failing signal, its event and the
-- notification to the other channels happen once per failing episode, across api restarts
-- and between two apis.
ALTER TABLE notification_channels
    ADD COLUMN IF NOT EXISTS consecutive_failures integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS last_failure_at timestamptz,
    ADD COLUMN IF NOT EXISTS failing_since timestamptz;

-- The worker sends a channel's pending deliveries in the order of their events (a target
-- that was down gets its backlog in order): it looks up each channel's oldest pending one.
-- notification_deliveries grows with time: the index is built CONCURRENTLY, so this file runs
-- outside a transaction (each statement on its own; IF NOT EXISTS makes a rerun safe).
CREATE INDEX CONCURRENTLY IF NOT EXISTS notification_deliveries_pending_head_idx ON notification_deliveries (channel_id, event_id, id)
    WHERE status = 'pending';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS notification_deliveries_pending_head_idx;
ALTER TABLE notification_channels
    DROP COLUMN failing_since,
    DROP COLUMN last_failure_at,
    DROP COLUMN consecutive_failures;
