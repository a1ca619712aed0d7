-- +goose Up
-- A placement sweep (scheduler/internal/drift) lists only the Proxmox clusters, every
-- OIKOS_PLACEMENT_INTERVAL, so the graph follows guests that moved between nodes; its report
-- is stored like any other (the api's placement follower reads its `moved` entries) but under
-- its own trigger, so neither the daily schedule nor GET /audit/drift mistakes it for a full
-- discovery.
ALTER TABLE drift_reports DROP CONSTRAINT drift_reports_trigger_check;
ALTER TABLE drift_reports ADD CONSTRAINT drift_reports_trigger_check
    CHECK (trigger IN ('scheduled', 'requested', 'placement'));

-- +goose Down
DELETE FROM drift_reports WHERE trigger = 'placement';
ALTER TABLE drift_reports DROP CONSTRAINT drift_reports_trigger_check;
ALTER TABLE drift_reports ADD CONSTRAINT drift_reports_trigger_check
    CHECK (trigger IN ('scheduled', 'requested'));
