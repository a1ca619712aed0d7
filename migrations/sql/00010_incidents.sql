-- +goose Up
-- Incidents (scheduler/internal/incidents): a health problem that outlasted its failure
-- threshold, grouped by root cause through the graph's dependency edges. An incident is an
-- ordinary signal (kind 'incident', dedup key 'incident:<root entity id>'), so it is
-- acknowledged, muted and resolved like any other; this table lists who is in it.

-- streak counts the consecutive runs of a check that found its current health: the failure
-- and success thresholds are counted in runs, not in time (a probe that flaps between up
-- and down never reaches a streak of 2 down).
ALTER TABLE check_results ADD COLUMN streak integer NOT NULL DEFAULT 1 CHECK (streak >= 1);

-- The root (role 'root', the entity whose failure explains the rest) and the entities
-- affected through it, each with the health and reason it had when last evaluated. A row
-- leaves when its entity recovers or stops depending on the root's failure (left_at); the
-- rows of a resolved incident stay as its record.
CREATE TABLE incident_members (
    incident_id uuid NOT NULL REFERENCES signals (id) ON DELETE CASCADE,
    entity_id   uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    role        text NOT NULL CHECK (role IN ('root', 'affected')),
    health      text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    joined_at   timestamptz NOT NULL DEFAULT now(),
    left_at     timestamptz,
    PRIMARY KEY (incident_id, entity_id)
);
CREATE INDEX incident_members_entity_idx ON incident_members (entity_id);

-- The note an operator leaves with an acknowledgement ("rebooting atlas, back in 10 min").
ALTER TABLE signals ADD COLUMN ack_note text NOT NULL DEFAULT '';
CREATE INDEX signals_kind_open_idx ON signals (kind) WHERE status <> 'resolved';

-- +goose Down
DROP INDEX signals_kind_open_idx;
ALTER TABLE signals DROP COLUMN ack_note;
DROP TABLE incident_members;
ALTER TABLE check_results DROP COLUMN streak;
