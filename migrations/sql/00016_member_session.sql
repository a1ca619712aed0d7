-- +goose Up
-- A scheduler holds a session advisory lock on a dedicated connection for as long as it runs
-- and records its key here (scheduler/internal/leases, session.go). Postgres releases the lock
-- the moment the process dies and its connections close, so the others release a dead
-- member's leases at once instead of waiting out their expiry. NULL: no lock held; the
-- member's leases are waited out.
ALTER TABLE scheduler_members ADD COLUMN session_lock bigint;

-- +goose Down
ALTER TABLE scheduler_members DROP COLUMN session_lock;
