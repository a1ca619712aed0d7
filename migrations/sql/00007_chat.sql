-- +goose Up
-- Chat, and assent the api can prove (docs/behaviours.md A5, X5, X6). Written only by the api.
--
-- chat_messages is the api's own record of every chat message sent through POST /api/v1/chat,
-- written before the turn is forwarded to the agent: who sent it (the token's name and role at
-- the time), in which session, when, and its text. An agent relaying an operator's assent
-- names a row of it, and the api proves the relay from the row alone (same session, an
-- operator's token, newer than what it grants, the deterministic detection of shared/policy),
-- never from anything the agent says. session_id has no foreign key: the api records the
-- message before the agent has created the session (agent_sessions is the agent's table).

CREATE TABLE chat_messages (
    id          uuid PRIMARY KEY,
    session_id  text NOT NULL CHECK (session_id ~ '^[A-Za-z0-9._:@/-]{1,128}$'),
    text        text NOT NULL CHECK (text <> '' AND octet_length(text) <= 16384),
    token_name  text NOT NULL CHECK (token_name <> ''),
    token_role  text NOT NULL CHECK (token_role IN ('operator', 'agent', 'readonly')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- used_for, used_at: the latest grant the message proved ('approval:<id>' or
    -- 'plan:<generation>'); NULL while it granted nothing. chat_message_uses has every one.
    used_for    text,
    used_at     timestamptz
);
CREATE INDEX chat_messages_session_idx ON chat_messages (session_id, created_at);

-- Every grant a message proved: one approval, or one generation of its session's plan. A
-- message may grant several approvals of the same turn, but each (message, approval) and each
-- (message, plan generation) only once: the unique indexes refuse a replay even under a race.
CREATE TABLE chat_message_uses (
    id               bigserial PRIMARY KEY,
    message_id       uuid NOT NULL REFERENCES chat_messages(id) ON DELETE CASCADE,
    approval_id      uuid REFERENCES approvals(id) ON DELETE CASCADE,
    plan_generation  integer CHECK (plan_generation > 0),
    -- used_by: the token that relayed the message (an agent's, or the operator's own).
    used_by          text NOT NULL,
    used_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT chat_message_uses_one_subject CHECK ((approval_id IS NULL) <> (plan_generation IS NULL))
);
CREATE UNIQUE INDEX chat_message_uses_approval_uniq ON chat_message_uses (message_id, approval_id)
    WHERE approval_id IS NOT NULL;
CREATE UNIQUE INDEX chat_message_uses_plan_uniq ON chat_message_uses (message_id, plan_generation)
    WHERE plan_generation IS NOT NULL;

-- relayed_by: the agent token that relayed the operator's chat message a decision was proved
-- from; decided_by then names the operator who wrote it. NULL for a direct decision.
ALTER TABLE approvals ADD COLUMN relayed_by text;

-- +goose Down
ALTER TABLE approvals DROP COLUMN relayed_by;
DROP TABLE chat_message_uses;
DROP TABLE chat_messages;
