-- +goose Up
-- The scheduler's results writer records the id of every batch it commits, in the batch's own
-- transaction: a batch retried after a COMMIT whose answer was lost (Postgres stopped or the
-- connection broke at that moment) fails on this key instead of writing its samples and runs
-- twice. The writer prunes rows older than a day; a retry comes seconds to minutes later.
CREATE TABLE scheduler_result_batches (
    id uuid PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE scheduler_result_batches;
