-- +goose Up
-- Nomos's chat turns (written only by oikos-agent). An assistant message is one iteration of
-- the loop: its text and the tool calls it made (tool_calls.message_id), so a later turn
-- replays exactly one entry per call. status tells a finished message from one a restart cut
-- short (interrupted: never replayed as if it had finished).
ALTER TABLE session_messages
    ADD COLUMN turn text NOT NULL DEFAULT '',
    ADD COLUMN status text NOT NULL DEFAULT 'complete' CHECK (status IN ('streaming', 'complete', 'interrupted')),
    ADD COLUMN finish_reason text NOT NULL DEFAULT '';
CREATE INDEX session_messages_streaming_idx ON session_messages (status) WHERE status = 'streaming';

ALTER TABLE tool_calls ADD COLUMN message_id bigint REFERENCES session_messages(id) ON DELETE CASCADE;
CREATE INDEX tool_calls_message_idx ON tool_calls (message_id) WHERE message_id IS NOT NULL;

-- +goose Down
DROP INDEX tool_calls_message_idx;
ALTER TABLE tool_calls DROP COLUMN message_id;
DROP INDEX session_messages_streaming_idx;
ALTER TABLE session_messages DROP COLUMN finish_reason, DROP COLUMN status, DROP COLUMN turn;
